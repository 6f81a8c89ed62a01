//! What the card holder reads about an automatic recharge (pt-BR).

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use vt_domain::tools::Termos;
use vt_domain::vt::timezone::Timezone;

use vt_store::{Recurrence, RecurrenceKind};

/// The WhatsApp template `purpose` with `parameters`.
pub(super) fn modelo<const N: usize>(
    purpose: &str,
    parameters: [(&str, String); N],
) -> crate::outbox::TemplateUse {
    crate::outbox::TemplateUse {
        purpose: purpose.into(),
        parameters: parameters.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    }
}

pub(super) fn brl(v: Decimal) -> String {
    vt_domain::vt::money_for_people("BRL", v, vt_domain::vt::Idioma::PtBr)
}

fn dia(d: NaiveDate) -> String {
    d.format("%d/%m/%Y").to_string()
}

pub(super) fn termos(rec: &Recurrence) -> String {
    rec.termos().describe()
}

pub(super) fn autorizar(cartao: &str, termos: &Termos) -> String {
    format!(
        "Para ativar a recarga automática do cartão {cartao} ({}), autorize o Pix Automático no app do seu banco: copie o código da próxima mensagem (Pix Copia e Cola) ou leia o QR code. Nada é cobrado agora; cada débito é avisado antes e pode ser cancelado até a véspera.",
        termos.describe()
    )
}

pub(super) fn ativada(rec: &Recurrence) -> String {
    format!(
        "Recarga automática ativada no cartão {}: {}. Cada débito é avisado antes e pode ser cancelado até a véspera. Para ver ou cancelar, diga \"minhas recargas automáticas\".",
        rec.card_masked,
        termos(rec)
    )
}

pub(super) fn nao_autorizada(rec: &Recurrence) -> String {
    format!(
        "A recarga automática do cartão {} não foi autorizada no banco, então nada será cobrado. Se quiser, é só pedir de novo.",
        rec.card_masked
    )
}

pub(super) fn cancelada_no_banco(rec: &Recurrence) -> String {
    format!(
        "A recarga automática do cartão {} foi cancelada no seu banco. Nenhuma nova cobrança será feita.",
        rec.card_masked
    )
}

pub(super) fn agendada(rec: &Recurrence, valor: Decimal, quando: NaiveDate) -> String {
    let motivo = match rec.kind {
        RecurrenceKind::Limite(l) => format!(
            "O saldo do cartão {} ficou abaixo de {}: a",
            rec.card_masked,
            brl(l)
        ),
        RecurrenceKind::Dia(_) => format!("A recarga automática do cartão {}: a", rec.card_masked),
    };
    format!(
        "{motivo} recarga automática de {} será debitada da sua conta em {} pelo Pix Automático, e o crédito entra no cartão em seguida. Se não quiser, diga \"cancelar recarga automática\" até {}.",
        brl(valor),
        dia(quando),
        dia(quando - chrono::Duration::days(1))
    )
}

/// A cancelled recurrence's charge on `dia` the bank could not stop any more.
pub(super) fn debito_mantido(dia: NaiveDate) -> String {
    format!(
        " (o débito de {} já estava em andamento no banco; se acontecer, a recarga é feita)",
        dia.format("%d/%m/%Y")
    )
}

pub(super) fn sem_saldo(rec: &Recurrence, valor: Decimal, nova: NaiveDate) -> String {
    format!(
        "Não consegui debitar a recarga automática de {} do cartão {}: a sua conta não tinha saldo suficiente. O banco tenta de novo em {}.",
        brl(valor),
        rec.card_masked,
        dia(nova)
    )
}

pub(super) fn comprovante(
    rec: &Recurrence,
    valor: Decimal,
    novo_saldo: Option<Decimal>,
    pago_em: DateTime<Utc>,
    e2e: &str,
    tz: &Timezone,
) -> String {
    let saldo = novo_saldo.map_or_else(String::new, |s| format!(" Novo saldo: {}.", brl(s)));
    format!(
        "Recarga automática feita: {} no cartão {}.{saldo} Debitado em {} pelo Pix Automático. Identificador do Pix: {e2e}.",
        brl(valor),
        rec.card_masked,
        tz.local(pago_em).format("%d/%m/%Y")
    )
}

pub(super) fn em_processamento(rec: &Recurrence, valor: Decimal) -> String {
    format!(
        "O débito da recarga automática de {} do cartão {} foi feito e a recarga está em processamento. Aviso quando ela for confirmada.",
        brl(valor),
        rec.card_masked
    )
}

pub(super) fn devolvida(rec: &Recurrence, valor: Decimal) -> String {
    format!(
        "A recarga automática de {} no cartão {} não pôde ser creditada, e o Pix foi devolvido à sua conta.",
        brl(valor),
        rec.card_masked
    )
}
