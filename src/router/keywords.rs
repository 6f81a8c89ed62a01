//! Level 1 of the router: how people really write these requests in pt-BR, as patterns over the
//! normalised text (lowercase, no accents). Zero tokens.

use std::sync::LazyLock;

use regex::Regex;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("invalid router pattern {pattern:?}: {e}"))
}

static HANDOFF: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(atendente|humano|operador|pessoa de verdade|pessoa real|falar com (alguem|uma pessoa|o suporte|gente)|atendimento humano|suporte humano|chama (alguem|um atendente))\b",
    )
});
static GOODBYE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(tchau|adeus|ate (logo|mais|breve|a proxima)|falou|flw|fui|valeu,? (tchau|ate mais|falou)|obrigad[oa],? (tchau|ate mais|era so isso|e so isso|ate logo)|era so isso|e so isso|so isso,? obrigad[oa]|encerrar( (o )?atendimento)?|sair|pode encerrar|encerra)\b",
    )
});
static RECHARGE_VERB: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(recarreg\w*|coloc\w*|poe|por \d|bot[ae]\w*|adicion\w*|deposit\w*|carreg\w*|inser\w*|quero (recarga|credito)|fazer (uma )?recarga|faz (uma )?recarga)\b",
    )
});
static RECHARGE_NOUN: LazyLock<Regex> = LazyLock::new(|| re(r"\brecarga\b"));
static BALANCE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(saldo|extrato|quanto (tem|tenho|resta|sobrou|ainda tem|ainda tenho|falta|ta)|quanto de credito|consulta\w*( o| do| meu)? (vt|cartao|vale)|ver (o )?(meu )?vt)\b",
    )
});
static GREETING: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(oi+|ola|ole|bom dia|boa tarde|boa noite|e ai|eai|hello|hi|hey|ajuda|menu|help|inicio|comecar|opcoes)\b|\bo que (voce )?(faz|pode fazer|sabe fazer)\b|\bcomo (funciona|voce funciona)\b",
    )
});
static CANCEL_WORD: LazyLock<Regex> = LazyLock::new(|| re(r"\b(cancel\w*|desisto)\b"));

pub(crate) fn is_handoff(n: &str) -> bool {
    HANDOFF.is_match(n)
}

pub(crate) fn is_goodbye(n: &str) -> bool {
    GOODBYE.is_match(n)
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
