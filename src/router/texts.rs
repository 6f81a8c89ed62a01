//! What the router says by itself, with zero tokens: the help (in pt-BR, and short in English and
//! Spanish for people who write in them), the answer to a request the product cannot serve, the
//! thanks, and the cards a conversation remembers.

use vt_domain::vt::mask_card;

/// The language a message was written in, as far as the router can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Pt,
    En,
    Es,
}

/// What the router answers when it knows nothing better (and no model is configured). Its examples
/// hold no card number: the product's own texts follow the rule that no full card reaches a reply.
/// What an answer given without the model (the tenant's budget spent) offers besides the help.
pub(crate) const PERSON_OFFER: &str =
    "Para outros assuntos, escreva \"falar com atendente\" e uma pessoa continua o seu atendimento.";

pub(crate) const HELP_TEXT: &str = "Posso ajudar com o seu vale-transporte:\n\
• consultar o saldo — \"saldo do cartão\" e o número do cartão\n\
• recarregar, sempre com a sua confirmação — \"recarregar 50 reais via pix\" e o número do cartão\n\
• avisar quando o saldo estiver baixo\n\
• chamar um atendente — \"falar com atendente\"";

const HELP_EN: &str = "I can help with your transit pass (vale-transporte) card:\n\
• check the balance — \"balance card\" and the card number\n\
• top it up, always after you confirm — \"recharge 50 via pix\" and the card number\n\
• call a person — \"atendente\"\n\
This service speaks Portuguese: the answers about your card come in Portuguese.";

const HELP_ES: &str = "Puedo ayudar con su tarjeta de vale-transporte:\n\
• consultar el saldo — \"saldo tarjeta\" y el número de la tarjeta\n\
• recargarla, siempre con su confirmación — \"recargar 50 via pix\" y el número de la tarjeta\n\
• llamar a una persona — \"atendente\"\n\
Este servicio habla portugués: las respuestas sobre su tarjeta llegan en portugués.";

/// The help in `lang`, after the greeting the message opened with.
pub(crate) fn help(lang: Lang, greeting: Option<&str>) -> String {
    match lang {
        Lang::En => format!("Hello! {HELP_EN}"),
        Lang::Es => format!("¡Hola! {HELP_ES}"),
        Lang::Pt => match greeting {
            Some(g) => format!("{g} {HELP_TEXT}"),
            None => HELP_TEXT.to_owned(),
        },
    }
}

/// A request the product cannot serve (a lost card, blocking, a new card, a refund): said honestly,
/// with a person offered.
pub(crate) fn unsupported(lang: Lang) -> &'static str {
    match lang {
        Lang::En => {
            "I can't do that here (lost or blocked cards, a new card, refunds). A person from our team can: reply *atendente* and I'll call one."
        }
        Lang::Es => {
            "No puedo hacer eso por aquí (tarjeta perdida o bloqueada, una tarjeta nueva, reembolsos). Una persona del equipo sí: responda *atendente* y la llamo."
        }
        Lang::Pt => {
            "Isso eu não consigo fazer por aqui: cartão perdido, roubado ou bloqueado, segunda via e estornos são com a equipe de atendimento. Quer que eu chame uma pessoa? É só responder *atendente*."
        }
    }
}

/// The line that tells someone who wrote in English or Spanish that the answer is in Portuguese.
pub(crate) fn portuguese_note(lang: Lang) -> Option<&'static str> {
    match lang {
        Lang::Pt => None,
        Lang::En => Some("(This service answers in Portuguese; reply \"help\" for what it can do.)"),
        Lang::Es => {
            Some("(Este servicio responde en portugués; escriba \"ayuda\" para ver qué puede hacer.)")
        }
    }
}

/// A payment card's number typed in the chat: never looked up as a transit card, never said back.
pub(crate) const PAYMENT_CARD: &str = "Esse número parece de um cartão de crédito ou débito, não do vale-transporte: \
     por segurança, não envie o número do seu cartão de pagamento por aqui. Para consultar ou recarregar, \
     informe o número do seu cartão de VT; para pagar com cartão de crédito, eu envio um link de pagamento seguro.";

/// The answer to "qual o protocolo?": the last case's number, or that there is none.
pub(crate) fn protocol(protocol: Option<&str>) -> String {
    match protocol {
        Some(p) => format!("O protocolo do seu atendimento é {p}."),
        None => "Não encontrei um protocolo de atendimento nesta conversa. Se quiser falar com uma pessoa da equipe, é só pedir.".into(),
    }
}

/// An open question level 1 cannot answer and no FAQ entry does (no model configured).
pub(crate) const OPEN_UNANSWERED: &str = "Essa eu não sei responder com certeza por aqui. \
     Para outros assuntos, escreva \"falar com atendente\" e uma pessoa continua o seu atendimento.";

/// What the assistant does not do (the weather, a bus's timetable): said, with what it does.
pub(crate) const OUT_OF_SCOPE: &str = "Isso eu não consigo responder: aqui eu cuido do seu vale-transporte — \
     saldo, recarga, recarga automática e pagamentos. Para outros assuntos da operadora, escreva \"falar com atendente\".";

/// Besides the cards forgotten: how everything else kept about the person is erased.
pub(crate) const ERASURE: &str = "Para apagar tudo o que a operadora guarda sobre você (LGPD), o pedido é \
     registrado por uma pessoa da equipe: escreva \"falar com atendente\" e peça a exclusão dos seus dados.";

/// A fare sum asked without its factors.
pub(crate) const FARE_FACTORS: &str = "Faço a conta para você: me diga quantos dias, quantas passagens por dia \
     e o valor da passagem — por exemplo, \"22 dias, 2 passagens por dia, a 4,40\".";

/// Two readings of a message, neither sure: the question that names both.
pub(crate) fn which_of(a: &str, b: &str) -> String {
    format!(
        "Não tenho certeza do que você precisa: quer {a} ou {b}? Pode responder com outras palavras também."
    )
}

pub(crate) const THANKS: &str = "De nada! Se precisar de algo sobre o seu VT, é só chamar.";
pub(crate) const NOTHING_TO_DO: &str = "Tudo bem! Se precisar de algo sobre o seu VT, é só chamar.";

/// The cards a conversation remembers, masked.
pub(crate) fn cards_list(cards: &[String]) -> String {
    match cards {
        [] => "Não tenho nenhum cartão seu guardado. Quando você me disser o número de um, eu lembro dele nas próximas conversas.".into(),
        [one] => format!(
            "Tenho um cartão seu guardado: {}. Para eu esquecê-lo, diga \"esquecer meus cartões\".",
            mask_card(one)
        ),
        many => format!(
            "Tenho estes cartões seus guardados: {}. Para eu esquecê-los, diga \"esquecer meus cartões\".",
            masked_list(many, "e")
        ),
    }
}

pub(crate) fn cards_forgotten(count: usize) -> String {
    match count {
        0 => "Não havia nenhum cartão seu guardado.".into(),
        1 => "Pronto, esqueci o seu cartão. Da próxima vez, me diga o número de novo.".into(),
        n => format!("Pronto, esqueci os seus {n} cartões. Da próxima vez, me diga o número de novo."),
    }
}

/// `****1111, ****2222 ou ****7890` (with `and_or` "ou" or "e").
pub(crate) fn masked_list(cards: &[String], and_or: &str) -> String {
    let masked: Vec<String> = cards.iter().map(|c| mask_card(c)).collect();
    match masked.as_slice() {
        [init @ .., last] if !init.is_empty() => format!("{} {and_or} {last}", init.join(", ")),
        _ => masked.join(""),
    }
}

/// A number typed as a card that cannot be one.
pub(crate) fn odd_length(digits: usize) -> String {
    format!("O número do cartão que você digitou tem {digits} dígitos; ele deve ter de 8 a 19.")
}

/// The offer of an automatic recharge, declined.
pub(crate) const AUTOMATIC_DECLINED: &str =
    "Tudo bem, sem recarga automática. Se mudar de ideia, é só dizer \"quero recarga automática\".";

/// Which card an automatic recharge is for, asked (with the remembered ones, masked).
pub(crate) fn automatic_which_card(remembered: &[String]) -> String {
    // The example names no card: a card-shaped number in a reply is one in clear, whoever's it is.
    let example = "Por exemplo: \"recarrega 50 no cartão (número do cartão) quando o saldo ficar abaixo de 20\" ou \"recarrega 100 todo dia 5 no (número do cartão)\".";
    if remembered.is_empty() {
        return format!("Para a recarga automática, me diga o número do cartão. {example}");
    }
    let masked: Vec<String> = remembered.iter().map(|c| vt_domain::vt::mask_card(c)).collect();
    format!(
        "Para qual cartão é a recarga automática? Tenho guardados: {}. Me diga o número completo. {example}",
        masked.join(", ")
    )
}
