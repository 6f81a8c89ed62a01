//! Notification texts in pt-BR, en and es. Money is formatted here (text only; metadata keeps numbers)
//! and the card is always masked.

use rust_decimal::Decimal;

use super::input::Idioma;
use super::money::format_money;

/// Subject and body of a low-balance notice.
pub fn saldo_baixo(
    idioma: Idioma,
    cartao_mascarado: &str,
    moeda: &str,
    saldo: Decimal,
    limite: Decimal,
) -> (String, String) {
    let saldo = format_money(moeda, saldo, idioma);
    let limite = format_money(moeda, limite, idioma);
    match idioma {
        Idioma::PtBr => (
            "Saldo de VT baixo".into(),
            format!(
                "Seu saldo de VT no cartão {cartao_mascarado} é {saldo}, no limite de {limite} ou abaixo dele. Faça uma recarga para não ficar sem crédito."
            ),
        ),
        Idioma::En => (
            "Low transit pass balance".into(),
            format!(
                "The transit pass balance on card {cartao_mascarado} is {saldo}, at or below the {limite} limit. Top it up so you don't run out."
            ),
        ),
        Idioma::Es => (
            "Saldo de VT bajo".into(),
            format!(
                "El saldo de VT de la tarjeta {cartao_mascarado} es {saldo}, igual o inferior al límite de {limite}. Recárgala para no quedarte sin crédito."
            ),
        ),
    }
}

/// The outcome of a recharge, as RF8 reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecargaStatus {
    Aprovada,
    Pendente,
    Negada,
    Erro,
}

impl RecargaStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aprovada => "aprovada",
            Self::Pendente => "pendente",
            Self::Negada => "negada",
            Self::Erro => "erro",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "aprovada" => Self::Aprovada,
            "pendente" => Self::Pendente,
            "negada" => Self::Negada,
            "erro" => Self::Erro,
            _ => return None,
        })
    }
}

/// Subject and body of a recharge notice.
pub fn recarga(
    idioma: Idioma,
    status: RecargaStatus,
    cartao_mascarado: &str,
    moeda: &str,
    valor: Option<Decimal>,
    novo_saldo: Option<Decimal>,
) -> (String, String) {
    let valor = valor.map(|v| format_money(moeda, v, idioma));
    let novo = novo_saldo.map(|v| format_money(moeda, v, idioma));
    let c = cartao_mascarado;
    match idioma {
        Idioma::PtBr => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            match status {
                RecargaStatus::Aprovada => (
                    "Recarga de VT aprovada".into(),
                    match novo {
                        Some(n) => format!("Sua recarga{de} no cartão {c} foi aprovada. Novo saldo: {n}."),
                        None => format!(
                            "Sua recarga{de} no cartão {c} foi aprovada. O novo saldo aparece em instantes."
                        ),
                    },
                ),
                RecargaStatus::Pendente => (
                    "Recarga de VT em processamento".into(),
                    format!(
                        "Sua recarga{de} no cartão {c} está em processamento. Avisaremos quando for concluída."
                    ),
                ),
                RecargaStatus::Negada => (
                    "Recarga de VT não aprovada".into(),
                    format!(
                        "Sua recarga{de} no cartão {c} não foi aprovada pelo meio de pagamento. Confira os dados do pagamento ou use outro meio."
                    ),
                ),
                RecargaStatus::Erro => (
                    "Falha na recarga de VT".into(),
                    format!(
                        "Não foi possível concluir sua recarga{de} no cartão {c}. Nenhuma cobrança foi confirmada; tente novamente mais tarde ou fale com o atendimento."
                    ),
                ),
            }
        }
        Idioma::En => {
            let of = valor.map(|v| format!(" of {v}")).unwrap_or_default();
            match status {
                RecargaStatus::Aprovada => (
                    "Transit pass top-up approved".into(),
                    match novo {
                        Some(n) => format!("Your top-up{of} on card {c} was approved. New balance: {n}."),
                        None => format!(
                            "Your top-up{of} on card {c} was approved. The new balance will show shortly."
                        ),
                    },
                ),
                RecargaStatus::Pendente => (
                    "Transit pass top-up in progress".into(),
                    format!(
                        "Your top-up{of} on card {c} is being processed. We will let you know when it is done."
                    ),
                ),
                RecargaStatus::Negada => (
                    "Transit pass top-up declined".into(),
                    format!(
                        "Your top-up{of} on card {c} was declined by the payment method. Check the payment details or use another method."
                    ),
                ),
                RecargaStatus::Erro => (
                    "Transit pass top-up failed".into(),
                    format!(
                        "We could not complete your top-up{of} on card {c}. No charge was confirmed; please try again later or contact support."
                    ),
                ),
            }
        }
        Idioma::Es => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            match status {
                RecargaStatus::Aprovada => (
                    "Recarga de VT aprobada".into(),
                    match novo {
                        Some(n) => {
                            format!("Tu recarga{de} en la tarjeta {c} fue aprobada. Nuevo saldo: {n}.")
                        }
                        None => format!(
                            "Tu recarga{de} en la tarjeta {c} fue aprobada. El nuevo saldo aparecerá en breve."
                        ),
                    },
                ),
                RecargaStatus::Pendente => (
                    "Recarga de VT en proceso".into(),
                    format!(
                        "Tu recarga{de} en la tarjeta {c} está en proceso. Te avisaremos cuando termine."
                    ),
                ),
                RecargaStatus::Negada => (
                    "Recarga de VT rechazada".into(),
                    format!(
                        "Tu recarga{de} en la tarjeta {c} fue rechazada por el medio de pago. Revisa los datos del pago o usa otro medio."
                    ),
                ),
                RecargaStatus::Erro => (
                    "Fallo en la recarga de VT".into(),
                    format!(
                        "No fue posible completar tu recarga{de} en la tarjeta {c}. No se confirmó ningún cargo; inténtalo más tarde o contacta a soporte."
                    ),
                ),
            }
        }
    }
}

/// A recharge whose outcome is still unknown when the follow-ups give up: a person checks it, nothing
/// is sent again.
pub fn recarga_em_verificacao(
    idioma: Idioma,
    cartao_mascarado: &str,
    moeda: &str,
    valor: Option<Decimal>,
) -> (String, String) {
    let valor = valor.map(|v| format_money(moeda, v, idioma));
    let c = cartao_mascarado;
    match idioma {
        Idioma::PtBr => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            (
                "Recarga de VT em verificação".into(),
                format!(
                    "Ainda não tivemos a confirmação da sua recarga{de} no cartão {c}. Um atendente vai verificar e falar com você; não faça a recarga de novo, para não pagar duas vezes."
                ),
            )
        }
        Idioma::En => {
            let of = valor.map(|v| format!(" of {v}")).unwrap_or_default();
            (
                "Transit pass top-up under review".into(),
                format!(
                    "We still have no confirmation of your top-up{of} on card {c}. A support agent will check it and get back to you; please do not top up again, so you are not charged twice."
                ),
            )
        }
        Idioma::Es => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            (
                "Recarga de VT en verificación".into(),
                format!(
                    "Aún no tenemos la confirmación de tu recarga{de} en la tarjeta {c}. Un agente la revisará y te contactará; no repitas la recarga, para no pagar dos veces."
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;

    #[test]
    fn low_balance_text_formats_money_and_masks_the_card() {
        let (assunto, msg) = saldo_baixo(Idioma::PtBr, "****7890", "BRL", dec!(12.5), dec!(20));
        assert_eq!(assunto, "Saldo de VT baixo");
        assert!(
            msg.contains("BRL 12,50") && msg.contains("BRL 20,00") && msg.contains("****7890"),
            "{msg}"
        );
        let (_, en) = saldo_baixo(Idioma::En, "****7890", "BRL", dec!(1234.5), dec!(2000));
        assert!(en.contains("BRL 1,234.50"), "{en}");
        let (es, _) = saldo_baixo(Idioma::Es, "****7890", "BRL", dec!(1), dec!(2));
        assert_eq!(es, "Saldo de VT bajo");
    }

    #[test]
    fn every_recharge_status_has_a_text() {
        for status in [
            RecargaStatus::Aprovada,
            RecargaStatus::Pendente,
            RecargaStatus::Negada,
            RecargaStatus::Erro,
        ] {
            for idioma in [Idioma::PtBr, Idioma::En, Idioma::Es] {
                let (a, m) = recarga(idioma, status, "****1", "BRL", Some(dec!(100)), Some(dec!(150)));
                assert!(!a.is_empty() && m.contains("****1"));
            }
            assert_eq!(RecargaStatus::parse(status.as_str()), Some(status));
        }
        let (_, m) = recarga(
            Idioma::PtBr,
            RecargaStatus::Aprovada,
            "****1",
            "BRL",
            Some(dec!(100)),
            Some(dec!(150)),
        );
        assert_eq!(
            m,
            "Sua recarga de BRL 100,00 no cartão ****1 foi aprovada. Novo saldo: BRL 150,00."
        );
    }
}

/// Subject and body when the system answered from its idempotency store: the recharge had already been
/// made by an earlier request with the same key, and nothing was charged now. (`status` is taken for
/// the signature shared with [`recarga`]; a replay is only told this way when it was approved.)
pub(crate) fn recarga_ja_feita(
    idioma: Idioma,
    _status: RecargaStatus,
    cartao_mascarado: &str,
    moeda: &str,
    valor: Option<Decimal>,
    novo_saldo: Option<Decimal>,
) -> (String, String) {
    let valor = valor.map(|v| format_money(moeda, v, idioma));
    let novo = novo_saldo.map(|v| format_money(moeda, v, idioma));
    let c = cartao_mascarado;
    match idioma {
        Idioma::PtBr => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            let saldo = novo.map(|n| format!(" Saldo: {n}.")).unwrap_or_default();
            (
                "Recarga de VT já realizada".into(),
                format!(
                    "Essa recarga{de} no cartão {c} já tinha sido feita antes; nada foi cobrado de novo.{saldo}"
                ),
            )
        }
        Idioma::En => {
            let of = valor.map(|v| format!(" of {v}")).unwrap_or_default();
            let saldo = novo.map(|n| format!(" Balance: {n}.")).unwrap_or_default();
            (
                "Transit pass top-up already made".into(),
                format!(
                    "This top-up{of} on card {c} had already been made; nothing was charged again.{saldo}"
                ),
            )
        }
        Idioma::Es => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            let saldo = novo.map(|n| format!(" Saldo: {n}.")).unwrap_or_default();
            (
                "Recarga de VT ya realizada".into(),
                format!(
                    "Esa recarga{de} en la tarjeta {c} ya se había hecho antes; no se cobró nada de nuevo.{saldo}"
                ),
            )
        }
    }
}

/// What a recharge paid by boleto is told while it waits for its payment: subject, the line before the
/// boleto (amount, masked card, due date, when it is credited), and how the digitable line is labelled
/// where it goes in the same message (a flow's notice; a chat sends the line as a message of its own).
pub fn recarga_boleto(
    idioma: Idioma,
    cartao_mascarado: &str,
    moeda: &str,
    valor: Option<Decimal>,
    boleto: &crate::boleto::Boleto,
) -> (String, String, &'static str) {
    let valor = valor.map(|v| format_money(moeda, v, idioma));
    let (c, ate, dias) = (
        cartao_mascarado,
        boleto.vence_em(),
        crate::boleto::COMPENSACAO_DIAS_UTEIS,
    );
    match idioma {
        Idioma::PtBr => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            (
                "Boleto da recarga de VT".into(),
                format!(
                    "Boleto da recarga{de} no cartão {c}: pague até {ate}. A recarga é creditada quando o banco confirmar o pagamento, em até {dias} dias úteis, e avisaremos quando for concluída."
                ),
                "Linha digitável",
            )
        }
        Idioma::En => {
            let of = valor.map(|v| format!(" of {v}")).unwrap_or_default();
            (
                "Boleto for your transit pass top-up".into(),
                format!(
                    "Boleto for your top-up{of} on card {c}: pay by {ate}. The top-up is credited once the bank clears the payment, within {dias} business days; we will let you know when it is done."
                ),
                "Digitable line",
            )
        }
        Idioma::Es => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            (
                "Boleto de la recarga de VT".into(),
                format!(
                    "Boleto de tu recarga{de} en la tarjeta {c}: paga hasta el {ate}. La recarga se acredita cuando el banco confirme el pago, en hasta {dias} días hábiles; te avisaremos cuando termine."
                ),
                "Línea digitable",
            )
        }
    }
}

/// A recharge whose boleto fell due unpaid: nothing was credited or charged.
pub fn recarga_boleto_vencido(
    idioma: Idioma,
    cartao_mascarado: &str,
    moeda: &str,
    valor: Option<Decimal>,
) -> (String, String) {
    let valor = valor.map(|v| format_money(moeda, v, idioma));
    let c = cartao_mascarado;
    match idioma {
        Idioma::PtBr => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            (
                "Boleto da recarga de VT vencido".into(),
                format!(
                    "O boleto da recarga{de} no cartão {c} venceu sem pagamento, e nada foi creditado nem cobrado. Se ainda quiser a recarga, é só pedir de novo."
                ),
            )
        }
        Idioma::En => {
            let of = valor.map(|v| format!(" of {v}")).unwrap_or_default();
            (
                "Transit pass top-up boleto expired".into(),
                format!(
                    "The boleto for your top-up{of} on card {c} fell due unpaid; nothing was credited or charged. If you still want the top-up, just ask again."
                ),
            )
        }
        Idioma::Es => {
            let de = valor.map(|v| format!(" de {v}")).unwrap_or_default();
            (
                "Boleto de la recarga de VT vencido".into(),
                format!(
                    "El boleto de tu recarga{de} en la tarjeta {c} venció sin pago; no se acreditó ni se cobró nada. Si aún quieres la recarga, pídela de nuevo."
                ),
            )
        }
    }
}

/// A duration as people say it in pt-BR: `30 segundos`, `1 minuto e 30 segundos`, `10 minutos`,
/// `1 hora e 5 minutos`.
pub(crate) fn duracao(secs: i64) -> String {
    let unit = |n: i64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let parts: Vec<String> = [
        (h, "hora", "horas"),
        (m, "minuto", "minutos"),
        (s, "segundo", "segundos"),
    ]
    .iter()
    .filter(|(n, ..)| *n > 0)
    .map(|(n, one, many)| unit(*n, one, many))
    .collect();
    match parts.as_slice() {
        [] => unit(0, "segundo", "segundos"),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} e {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod duracao_tests {
    use super::duracao;

    #[test]
    fn durations_in_words() {
        for (secs, words) in [
            (2, "2 segundos"),
            (1, "1 segundo"),
            (60, "1 minuto"),
            (90, "1 minuto e 30 segundos"),
            (600, "10 minutos"),
            (3600, "1 hora"),
            (3905, "1 hora, 5 minutos e 5 segundos"),
        ] {
            assert_eq!(duracao(secs), words, "{secs}");
        }
    }
}
