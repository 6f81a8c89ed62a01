//! Level 1 of the router: how people really write these requests — pt-BR as typed on WhatsApp (no
//! accents, abbreviations, slang), and the basics of English and Spanish — as patterns over the
//! normalised text (lowercase, no accents). Zero tokens. The patterns are grown from the corpus in
//! `tests/fixtures/router/corpus.yaml` and measured on it (`router::corpus`), never from one phrase.

use std::sync::LazyLock;

use regex::Regex;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("invalid router pattern {pattern:?}: {e}"))
}

static HANDOFF: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(atendente|humano|operador|pessoa de verdade|pessoa real|uma pessoa|alguem de verdade|falar com (alguem|uma pessoa|o suporte|gente|voces|um atendente)|atendimento humano|suporte humano|chama (alguem|um atendente|o atendente)|quero (o )?suporte|sac|reclam\w*|ouvidoria|human|real person|talk to (someone|a person|an agent)|agente humano|hablar con (alguien|una persona))\b",
    )
});
/// A new Pix code for the recharge whose code expired.
static NEW_CODE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(nov[oa] (codigo|cod|pix|qr ?code|qr|chave|link)|(codigo|pix|qr ?code|qr|link) nov[oa]|outr[oa] (codigo|cod|pix|qr ?code|qr|chave|link)|(gera|gere|gerar|manda|mande|envia|envie|quero|preciso de) (outro|um novo|novo|outro novo) (codigo|pix|qr ?code|qr|link)|(o )?(codigo|pix|qr ?code|qr|link)( do pix| de pagamento| do cartao)? (expirou|venceu|vencido|expirado|nao (funciona|funcionou|vale mais|abre))|new (pix )?(code|link))\b",
    )
});
static GOODBYE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(tchau|tchauzinho|adeus|ate (logo|mais|breve|a proxima|amanha)|falou|flw|fui|xau|bye|adios|valeu,? (tchau|ate mais|falou|flw)|obrigad[oa],? (tchau|ate mais|era so isso|e so isso|ate logo)|era so isso|e so isso|so isso,? obrigad[oa]|encerrar( (o )?atendimento)?|sair|pode encerrar|encerra)\b",
    )
});
static THANKS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(muito )?(obrigad[oa]|obg|obgd|brigad[oa]|valeu|vlw|agradecid[oa]|thanks|thank you|thx|gracias)( (mesmo|demais|viu|pela ajuda|moco|moca|amigo))*[.! ]*$",
    )
});
static RECHARGE_VERB: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(recarreg\w*|recargu\w*|coloc\w*|coloqu\w*|poe|ponha|por( mais)? \d+|bota|bote|botar|botei|botem|boto|adicion\w*|add|deposit\w*|carreg\w*|credit(a|ar|e|em)|inser\w*|quero (recarga|credito|recarregar|colocar)|quero( mais)? \d+|fazer (uma )?recarga|faz (uma )?recarga|top ?up|recharge|reload|add (money|credit)|recargar?|cargar|poner|manda \d+)\b",
    )
});
static RECHARGE_NOUN: LazyLock<Regex> = LazyLock::new(|| re(r"\brecarga\b"));
static BALANCE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(saldo|sld|extrato|(qual|quanto|qto|qnto|qnt)( e)?( o)? (valor|credito|dinheiro)( que)?( eu)? (tem|tenho|ha|resta|sobrou|disponivel)|(qto|qnto|qnt|quanto|qual o valor que)( (eu|ainda|que|de credito|de saldo))* (tem|tenho|tinha|ta|to|esta|resta|restou|sobrou|sobra|ficou|fica|falta|vale|possuo|tem de credito|tenho de credito)|quanto de credito|credito (disponivel|restante|que (tem|tenho|resta))|consult\w*( o| do| meu| de)? (vt|cartao|vale|bilhete|credito)|ver (o )?(meu )?(vt|vale)|como (ta|esta) (o )?(meu )?(vt|vale|cartao)|balance|how much (do i have|is (on|in|left))|cuanto (tengo|tiene|hay|queda|me queda))\b",
    )
});
static GREETING: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(oi+e?|ola|ole|opa|eai|e ai|eae|salve|fala|alo|bom dia+|boa tarde|boa noite|hello|hi|hey|good (morning|afternoon|evening)|hola|buenas|buenos dias|buenas tardes|buenas noches|ajuda|socorro|menu|help|ayuda|inicio|comecar|opcoes)\b|\bo que (voce |vc )?(faz|pode fazer|sabe fazer)\b|\bcomo (funciona|voce funciona)\b|^(me ajuda|preciso de ajuda|pode me ajudar)[?!. ]*$|\b(can you help( me)?|i need help|help me|necesito ayuda|ayudame)\b",
    )
});
static CANCEL_WORD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(cancel\w*|desist\w*|nao quero mais|esquece (isso|a recarga|essa recarga)|deixa pra la|nao precisa mais)\b|\bnao quero[.! ]*$",
    )
});
/// Requests the product cannot serve: a lost or stolen card, blocking, a new card, refunds.
static UNSUPPORTED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(perdi|perdido|perdeu|roubad\w*|roubaram|furtad\w*|furtaram|extravi\w*|bloque\w*|desbloque\w*|segunda via|2a via|2 via|2ª via|via nova|cartao novo|novo cartao|outro cartao fisico|estorn\w*|reembols\w*|devolu\w*|devolv\w*|cobrad[oa] (duas|2) vezes|cobranca indevida|lost|stolen|robaron|perdi mi)\b",
    )
});
static LIST_CARDS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(meus cartoes|quais (sao )?(os )?(meus )?cartoes|que cartoes|cartoes (cadastrados|salvos|guardados|que (voce|vc) (tem|sabe|guardou|conhece|lembra)))\b",
    )
});
static FORGET_CARDS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(esquec\w*|apag\w*|remov\w*|exclu\w*|delet\w*|limp\w*|tira\w*|forget)\b.*\b(cart(ao|oes)|cards?|numeros?)\b",
    )
});
/// A card meant without its number: "nele", "no mesmo", "esse cartão".
static SAME_CARD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(nele|nela|dele|desse|deste|nesse|neste|no mesmo|do mesmo|o mesmo|mesmo cartao|esse cartao|este cartao|esse vt|esse ai|nele ai|meu cartao|meu vt|meu vale|my card|that card|same card|mi tarjeta)\b",
    )
});
static ENGLISH: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(hi|hello|hey|good (morning|afternoon|evening)|what|whats|my|balance|card|please|how|top up|recharge|can|you|i|want|need|help|thanks|thank|is|the|check|much)\b",
    )
});
static SPANISH: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(hola|tarjeta|cuanto|tengo|quiero|recargar|buenas|buenos|gracias|por favor|necesito|mi|puedo|cual es|ayuda|usted)\b",
    )
});
/// Words only Portuguese uses, which rule English and Spanish out.
static PORTUGUESE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(oi|ola|voce|vc|cartao|meu|minha|quero|qual|quanto|obrigad[oa]|nao|sim|tenho|recarrega\w*|pra|pro|reais|ajuda)\b",
    )
});

/// "minhas recargas automáticas", "quais recargas automáticas eu tenho": a list asked for.
static LIST_AUTOMATIC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(minhas|meus|quais|qual|ver|veja|listar|lista|mostr\w*|tenho|tem alguma|existe|consultar|status|como (esta|estao|ta|tao))\b",
    )
});

/// "desativar", "parar", "para com", "suspender": an automatic recharge stopped, besides the cancel
/// words of any request.
static STOP_AUTOMATIC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(desativ\w*|desablit\w*|desabilit\w*|parar|pare|para com|suspend\w*|interromp\w*|encerr\w*|remov\w*|exclu\w*|apag\w*|tira\w*|desliga\w*|chega de)\b",
    )
});

/// A wish to stop an automatic recharge.
pub(crate) fn stops_automatic(n: &str) -> bool {
    says_cancel(n) || STOP_AUTOMATIC.is_match(n)
}

/// A wish to see the automatic recharges one has (not to create one).
pub(crate) fn lists_automatic(n: &str) -> bool {
    LIST_AUTOMATIC.is_match(n)
}

pub(crate) fn is_handoff(n: &str) -> bool {
    HANDOFF.is_match(n)
}

pub(crate) fn is_new_code(n: &str) -> bool {
    NEW_CODE.is_match(n)
}

pub(crate) fn is_goodbye(n: &str) -> bool {
    GOODBYE.is_match(n)
}

pub(crate) fn is_thanks(n: &str) -> bool {
    THANKS.is_match(n) || closes_with_thanks(n)
}

/// Words that thank or close, as people write them ("vlw, era só isso", "beleza, brigadão", "tmj").
const THANKING: &[&str] = &[
    "obrigado",
    "obrigada",
    "obg",
    "obgd",
    "brigado",
    "brigada",
    "brigadao",
    "brigadinho",
    "valeu",
    "vlw",
    "valew",
    "tmj",
    "thanks",
    "gracias",
    "agradeco",
];
/// Words that may stand around a thanks without asking anything ("era só isso", "show", "muito").
const AROUND_THANKS: &[&str] = &[
    "era", "so", "isso", "e", "muito", "demais", "mesmo", "viu", "pela", "ajuda", "ok", "ta", "bom", "entao",
    "por", "enquanto", "show", "beleza", "blz", "fechou", "top", "otimo", "massa", "perfeito", "ai", "moco",
    "moca", "amigo", "amiga", "mano", "tudo", "certo", "de", "novo", "mais", "nada",
];

/// A message that only thanks or closes, in people's words: every word thanks or goes with a thanks,
/// and one of them thanks (or says "that's all").
fn closes_with_thanks(n: &str) -> bool {
    let words: Vec<&str> = n
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let thanks = words.iter().any(|w| THANKING.contains(w)) || n.contains("so isso");
    !words.is_empty()
        && words.len() <= 8
        && thanks
        && words
            .iter()
            .all(|w| THANKING.contains(w) || AROUND_THANKS.contains(w))
}

/// A recharge request: a recharge verb, or the noun without a balance question around it.
pub(crate) fn is_recharge(n: &str) -> bool {
    RECHARGE_VERB.is_match(n) || (RECHARGE_NOUN.is_match(n) && !BALANCE.is_match(n))
}

pub(crate) fn is_balance(n: &str) -> bool {
    BALANCE.is_match(n)
}

pub(crate) fn is_greeting(n: &str) -> bool {
    GREETING.is_match(n)
}

pub(crate) fn says_cancel(n: &str) -> bool {
    CANCEL_WORD.is_match(n)
}

/// A message whose first word is a no ("não confirmo", "nao, tá errado").
pub(crate) fn starts_with_no(n: &str) -> bool {
    let first = n.split(|c: char| !c.is_alphanumeric()).find(|w| !w.is_empty());
    matches!(first, Some("nao" | "naao" | "n" | "nope" | "negativo"))
}

pub(crate) fn is_unsupported(n: &str) -> bool {
    UNSUPPORTED.is_match(n)
}

pub(crate) fn lists_cards(n: &str) -> bool {
    LIST_CARDS.is_match(n)
}

/// The person's own cards named beyond doubt ("quais são os meus cartões?", "cartões salvos"): read
/// before the FAQ, whose entry on paying by card shares the word. A payment card is another subject.
static MY_CARDS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(meus cartoes|cartoes (cadastrados|salvos|guardados|que (voce|vc) (tem|sabe|guardou|conhece|lembra)))\b",
    )
});

pub(crate) fn names_my_cards(n: &str) -> bool {
    MY_CARDS.is_match(n) && !n.contains("credito") && !n.contains("debito")
}

pub(crate) fn forgets_cards(n: &str) -> bool {
    FORGET_CARDS.is_match(n)
}

pub(crate) fn means_same_card(n: &str) -> bool {
    SAME_CARD.is_match(n)
}

/// The language of a message, when it is clearly not Portuguese: two English (or Spanish) words and
/// none that only Portuguese uses.
pub(crate) fn language(n: &str) -> super::texts::Lang {
    use super::texts::Lang;
    if PORTUGUESE.is_match(n) {
        return Lang::Pt;
    }
    let count = |r: &Regex| r.find_iter(n).count();
    let (en, es) = (count(&ENGLISH), count(&SPANISH));
    if en >= 2 && en > es {
        Lang::En
    } else if es >= 2 && es >= en {
        Lang::Es
    } else if en == 1 && es == 0 && n.split_whitespace().count() <= 2 {
        // "hi", "hello", "balance": one word, and it is English.
        Lang::En
    } else if es == 1 && en == 0 && n.split_whitespace().count() <= 2 {
        Lang::Es
    } else {
        Lang::Pt
    }
}

static HELLO: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(oi+e?|ola|ole|opa|e ai|eai|eae|salve|fala|alo|hello|hi|hey|hola|buenas)\b"));

/// The greeting a message opens with, answered in kind ("Boa tarde!").
pub(crate) fn greeting_back(n: &str) -> Option<&'static str> {
    let has = |w: &str| n.contains(w);
    if has("bom dia") || has("buenos dias") {
        Some("Bom dia!")
    } else if has("boa tarde") || has("buenas tardes") {
        Some("Boa tarde!")
    } else if has("boa noite") || has("buenas noches") {
        Some("Boa noite!")
    } else if HELLO.is_match(n) {
        Some("Olá!")
    } else {
        None
    }
}

/// An open question — how, why, what if, how long, can I — or a problem told ("não passou", "paguei e
/// não caiu"): what a FAQ or a model answers, not a request with parameters, even when it names
/// "recarga" or "saldo".
static OPEN_QUESTION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(como (funciona|faz|faco|eu faco|que|e que|posso|consigo|recarreg\w*|pago|peco|funciona)|por ?que|pq|porque|pra que|para que|o que (acontece|e|pode ser|faco|eu faco|fazer)|e se|quanto tempo|em quanto tempo|quando (cai|vai cair|fica|e que)|qual (o|e o) (prazo|limite|valor (minimo|maximo))|quais (as|os|sao)|e possivel|sera que|perco|vou perder|aceita\w*|demora\w*|nao (passou|passa|caiu|cai|entrou|apareceu|funciona|funcionou)|mud(ei|ar|ando) de (emprego|empresa|trabalho)|demitid\w*|sai(r)? da empresa|paguei|recus\w*|nao (aceitou|aceita|leu|le)|expira\w*|caduca\w*|prescreve\w*|perde o (saldo|credito))\b",
    )
});

/// A what-if about the credit itself: losing it, its expiry, leaving the job.
static WHAT_IF: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(e se|perco|vou perder|perde o|perder o|expira\w*|caduca\w*|prescreve\w*|vence o (saldo|credito)|demitid\w*|sai(r)? da empresa|mud(ei|ar|ando) de (emprego|empresa|trabalho))\b",
    )
});

pub(crate) fn asks_what_if(n: &str) -> bool {
    WHAT_IF.is_match(n)
}

pub(crate) fn is_open_question(n: &str) -> bool {
    OPEN_QUESTION.is_match(n)
}

static GREETING_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^((oi+e?|ola|ole|opa|e ?ai|eae|salve|alo|bom dia+|boa tarde|boa noite|hello|hi|hey|hola|buenas|buenos dias|buenas (tardes|noches)|good (morning|afternoon|evening)|tudo (bem|bom|certo)|td (bem|bom))[\s,.!?;:]*)+",
    )
});

/// The message after the greeting it opens with ("oi, meu vt não passou…" → "meu vt não passou…").
pub(crate) fn after_greeting(n: &str) -> &str {
    GREETING_PREFIX.find(n).map_or(n, |m| &n[m.end()..]).trim()
}

/// "22 dias úteis … 4,40 … ida e volta": the fare a month of work days costs, asked for.
static DAYS: LazyLock<Regex> = LazyLock::new(|| re(r"\b(\d{1,2}) dias?\b"));
static FARE: LazyLock<Regex> = LazyLock::new(|| re(r"\b(\d{1,3}[,.]\d{2})\b"));
static BOTH_WAYS: LazyLock<Regex> = LazyLock::new(|| re(r"\b(ida e volta|vou e volto)\b"));
/// Trips a day, in digits or words: "duas passagens por dia", "4 conducoes ao dia", "3x por dia".
static TRIPS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(\d|uma|um|duas|dois|tres|quatro|cinco|seis)\s*(?:x|passagens?|viagens?|vezes|conducoes|conducao|onibus|trechos?|tarifas?)\s+(?:por|ao|a cada|todo|cada)\s+dia\b",
    )
});
static HOW_MUCH: LazyLock<Regex> = LazyLock::new(|| re(r"\b(quanto|qto|qnto|total|preciso|precisa|da)\b"));

/// A "N days at a fare" question, by its factors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FareSum {
    pub days: String,
    /// Trips a day (2 for "ida e volta"; 1 when none is said).
    pub trips: u32,
    pub fare: String,
}

impl FareSum {
    /// The expression `calcular` evaluates: days × trips × fare.
    pub(crate) fn expression(&self) -> String {
        if self.trips == 1 {
            format!("{} * {}", self.days, self.fare)
        } else {
            format!("{} * {} * {}", self.days, self.trips, self.fare)
        }
    }

    /// The factors said back, as the person reads them: "21 dias × 2 passagens por dia × R$ 5,00".
    pub(crate) fn said(&self) -> String {
        let fare = format!("R$ {}", self.fare.replace('.', ","));
        match self.trips {
            1 => format!("{} dias × {fare}", self.days),
            n => format!("{} dias × {n} passagens por dia × {fare}", self.days),
        }
    }
}

/// The factors of a "N days at a fare" question, for `calcular`: every one of them — days, trips a day
/// (in digits or words; "ida e volta" is two), fare.
pub(crate) fn fare_sum(n: &str) -> Option<FareSum> {
    if !HOW_MUCH.is_match(n) {
        return None;
    }
    let days = DAYS.captures(n)?.get(1)?.as_str().to_owned();
    let fares: Vec<&str> = FARE
        .captures_iter(n)
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .collect();
    let [fare] = fares.as_slice() else {
        return None;
    };
    let trips = match TRIPS.captures(n).and_then(|c| c.get(1)).map(|m| m.as_str()) {
        Some("uma" | "um") => 1,
        Some("duas" | "dois") => 2,
        Some("tres") => 3,
        Some("quatro") => 4,
        Some("cinco") => 5,
        Some("seis") => 6,
        Some(d) => d.parse().unwrap_or(1),
        None if BOTH_WAYS.is_match(n) => 2,
        None => 1,
    };
    Some(FareSum {
        days,
        trips,
        fare: fare.replace(',', "."),
    })
}

/// A question for the protocol number: "qual o protocolo?", "me passa o número do protocolo de novo",
/// "perdi o protocolo".
static PROTOCOL: LazyLock<Regex> = LazyLock::new(|| re(r"\bprotocol\w*\b"));

pub(crate) fn asks_protocol(n: &str) -> bool {
    // Citing a number, or asking for a person, is no question for one.
    PROTOCOL.is_match(n)
        && !n.bytes().any(|b| b.is_ascii_digit())
        && n.split_whitespace().count() <= 14
        && !is_handoff(n)
}

/// Words of a balance or credit ("tá zerado", "sem crédito", "acabou o saldo").
static CREDIT: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b(saldo|credito\w*|zerad\w*|acabou|quanto|sobr\w*|rest\w*|dinheiro|valor)\b"));
/// A wish for a person, in softer words than level 1's: what makes a model's "a person" believable.
static PERSON: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\b(atend\w*|human\w*|pessoa|alguem|suporte|operador\w*|gente|falar com|ligar|telefone|reclam\w*)\b")
});
static CARD_WORD: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b(cart(ao|oes)|vt|vales?|bilhetes?|cards?|numeros?)\b"));

pub(crate) fn mentions_credit(n: &str) -> bool {
    CREDIT.is_match(n)
}

pub(crate) fn wishes_person(n: &str) -> bool {
    PERSON.is_match(n)
}

pub(crate) fn mentions_card(n: &str) -> bool {
    CARD_WORD.is_match(n)
}

/// A payment said to be made: "paguei", "fiz o pix", "o dinheiro saiu da conta", "pagamento feito".
static PAID: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(pag(uei|ei|amos|aram)|ja pag\w*|(fiz|fizemos|mandei|enviei|efetuei|realizei|transferi) (o |um |uma )?(pix|pagamento|pagto|pgto|transferencia|deposito)|transferi|(pix|pagamento|pagto|pgto|recarga|boleto) (feito|realizado|efetuado|confirmado|aprovado|pago|paga|concluido)|pag[oa] (no|pelo|via|com)|debit(ou|aram)|descont(ou|aram)|(dinheiro|valor) (ja )?saiu|saiu (da|o dinheiro da|o valor da) (minha )?conta|tir(ou|aram) (da minha conta|o dinheiro|o valor))\b",
    )
});
/// Any word of a payment, for a complaint that names the payment but not its making ("o pix não caiu").
static PAYMENT_WORD: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b(pix|pagamento|pagto|pgto|comprovante|cobran\w*|cobr(ou|aram|ado|ada))\b"));
/// The credit said not to have arrived: "não caiu", "não creditou", "cadê o crédito", "e nada".
static NOT_ARRIVED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(na?o|nem|n)( \w+){0,3} (caiu|cai|caio|entrou|entra|creditou|creditaram|credita|foi creditad\w*|apareceu|aparece|chegou|veio|subiu|atualizou|consta|constou|recebi|foi feita|foi (pra|para) o cartao)\b|\bcade (o|a|meu|minha)\b|\bsumiu\b|\b(e|mas|ate agora) nada\b|\bnada (de|do|da) (credito|saldo|recarga|valor)\b|\b(cartao|saldo|vt) continua (zerado|igual|o mesmo|sem)\b|\bainda (ta|esta) zerad\w*\b",
    )
});
/// Charged twice: "cobraram duas vezes", "cobrança duplicada", "paguei em dobro".
static TWICE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b((cobr|pag|debit|descont)\w* (duas|2|dois) vezes|(cobr|pag|debit|descont)\w* (em )?dobr\w*|(duas|2) (cobrancas|vezes a mesma)|(cobranca|pagamento|debito|pix) (duplicad\w*|dobrad\w*|em dobro|duas vezes|repetid\w*)|duplicidade)\b",
    )
});

/// Where a fare is taken: what a double debit at the turnstile names.
static FARE_TAKEN: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\b(passage\w*|onibus|catraca|tarifa|metro|trem|validador|brt|cobrador|motorista)\b")
});

/// How a complaint about a payment reads: `Some(true)` when charged twice, `Some(false)` when paid
/// and not credited, `None` when it is no complaint ("como pago o pix?", "não paguei ainda").
pub(crate) fn complains_of_payment(n: &str) -> Option<bool> {
    // A fare taken twice at the turnstile is about the card's use, not a payment made here.
    if TWICE.is_match(n) && !FARE_TAKEN.is_match(n) {
        return Some(true);
    }
    let paid = PAID.is_match(n) || PAYMENT_WORD.is_match(n);
    (paid && NOT_ARRIVED.is_match(n)).then_some(false)
}

pub(crate) fn mentions_payment(n: &str) -> bool {
    PAID.is_match(n) || PAYMENT_WORD.is_match(n) || TWICE.is_match(n)
}

/// A card lost, stolen or damaged, or a block asked for in so many words ("perdi meu vt", "roubaram
/// meu cartão", "bloqueia o cartão") — not a question about a block ("tá bloqueado?"), which is the
/// card's situation.
static LOST_CARD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(perdi|perdeu|perdid[oa]|roubad[oa]s?|roubaram|furtad[oa]s?|furtaram|assaltad[oa]s?|levaram|extravi\w*|quebr\w*|danificad[oa]|bloquear|bloqueia|bloqueie|bloqueio|lost|stolen|robaron)\b",
    )
});
/// A new card for one lost or blocked ("quero a segunda via", "2ª via do vt", "um cartão novo").
static SECOND_COPY: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\b(segunda via|2a via|2 via|2ª via|via nova|cartao novo|novo cartao|outro cartao)\b")
});
static STOLEN: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b(roub\w*|furt\w*|assalt\w*|levaram|stolen|robaron)\b"));
static DAMAGED: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b(quebr\w*|danific\w*|estrag\w*|rach\w*|molh\w*|dobr\w*)\b"));

/// A card to block: lost, stolen, damaged, or a block asked — of a card, not of a code or a protocol.
pub(crate) fn is_lost_card(n: &str) -> bool {
    LOST_CARD.is_match(n)
        && (mentions_card(n)
            || n.split_whitespace()
                .any(|w| w.len() >= 8 && w.bytes().all(|b| b.is_ascii_digit())))
        && !["protocolo", "codigo", "pix", "boleto", "senha", "comprovante"]
            .iter()
            .any(|w| n.contains(w))
}

/// A second copy of the card asked for (not of a code, a boleto or a receipt).
pub(crate) fn asks_second_copy(n: &str) -> bool {
    SECOND_COPY.is_match(n)
        && !["codigo", "pix", "boleto", "comprovante", "recibo", "nota"]
            .iter()
            .any(|w| n.contains(w))
}

/// Why a card is blocked, as the message says it: `roubo`, `dano`, else `perda`.
pub(crate) fn block_reason(n: &str) -> &'static str {
    if STOLEN.is_match(n) {
        "roubo"
    } else if DAMAGED.is_match(n) {
        "dano"
    } else {
        "perda"
    }
}

/// A question whether the card is blocked or cancelled ("meu cartão foi bloqueado?", "tá cancelado?"):
/// the card's situation, not a block.
static BLOCKED_STATE: LazyLock<Regex> = LazyLock::new(|| re(r"\b(bloquead[oa]|cancelad[oa])\b"));

pub(crate) fn asks_if_blocked(n: &str, text: &str) -> bool {
    BLOCKED_STATE.is_match(n) && (text.trim_end().ends_with('?') || is_open_question(n)) && !is_lost_card(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thanks_and_closings_in_peoples_words() {
        let n = |t: &str| vt_domain::vt::parse::normalize(t);
        for t in [
            "vlw, era só isso",
            "beleza, valeu demais",
            "show, brigadão",
            "tmj",
            "era só isso, obrigada",
        ] {
            assert!(is_thanks(&n(t)), "{t}");
        }
        for t in [
            "valeu, e o saldo?",
            "obrigado, quero recarregar 50",
            "só isso de saldo?",
        ] {
            assert!(!is_thanks(&n(t)), "{t}");
        }
    }

    #[test]
    fn a_fare_sum_reads_every_factor() {
        let sum = |t: &str| fare_sum(&vt_domain::vt::parse::normalize(t));
        let two = sum("quanto preciso pra 21 dias, duas passagens por dia de 5,00?").expect("a sum");
        assert_eq!(two.expression(), "21 * 2 * 5.00");
        assert_eq!(two.said(), "21 dias × 2 passagens por dia × R$ 5,00");
        let four = sum("qual o total de 20 dias com 4 conduções ao dia a 4,40").expect("a sum");
        assert_eq!(four.expression(), "20 * 4 * 4.40");
        assert_eq!(
            sum("quanto dá 22 dias ida e volta a 4,40").expect("a sum").trips,
            2
        );
        assert_eq!(
            sum("quanto da 22 dias a 4,40").expect("a sum").expression(),
            "22 * 4.40"
        );
        assert_eq!(
            sum("tres passagens por dia, 10 dias, 6,00 cada, quanto fica?")
                .expect("a sum")
                .expression(),
            "10 * 3 * 6.00"
        );
    }
}
