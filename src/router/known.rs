//! The intents the router knows by name. The intents file (data) may list others: those the model
//! handles; these the router routes itself, with zero tokens where it can.

/// An intent the router routes itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    ConsultarSaldo,
    PrepararRecarga,
    ConfirmarRecarga,
    CancelarRecarga,
    NovoCodigoPix,
    TransferirParaHumano,
    EncerrarAtendimento,
    Ajuda,
    MeusCartoes,
    EsquecerCartoes,
    TarefaComposta,
    /// An answer of the operator's FAQ.
    Faq,
    /// Arithmetic done by code (`calcular`).
    Calcular,
    /// A recharge that happens by itself: create, list, cancel (`recarga_automatica`).
    RecargaAutomatica,
    /// A complaint about a payment, answered from the conversation's charges (`verificar_pagamento`).
    VerificarPagamento,
    /// A card's situation — and why it did not pass the turnstile — from the card system.
    ConsultarSituacao,
    /// A card's last credits and uses, from the card system.
    Extrato,
}

impl Known {
    const ALL: [Self; 17] = [
        Self::ConsultarSaldo,
        Self::PrepararRecarga,
        Self::ConfirmarRecarga,
        Self::CancelarRecarga,
        Self::NovoCodigoPix,
        Self::TransferirParaHumano,
        Self::EncerrarAtendimento,
        Self::Ajuda,
        Self::MeusCartoes,
        Self::EsquecerCartoes,
        Self::TarefaComposta,
        Self::Faq,
        Self::Calcular,
        Self::RecargaAutomatica,
        Self::VerificarPagamento,
        Self::ConsultarSituacao,
        Self::Extrato,
    ];

    /// Its key in the intents file (and the name of the action it runs, where it runs one).
    pub(crate) fn key(self) -> &'static str {
        match self {
            Self::ConsultarSaldo => "consultar_saldo",
            Self::PrepararRecarga => "preparar_recarga",
            Self::ConfirmarRecarga => "confirmar_recarga",
            Self::CancelarRecarga => "cancelar_recarga",
            Self::NovoCodigoPix => "novo_codigo_pix",
            Self::TransferirParaHumano => "transferir_para_humano",
            Self::EncerrarAtendimento => "encerrar_atendimento",
            Self::Ajuda => "ajuda",
            Self::MeusCartoes => "meus_cartoes",
            Self::EsquecerCartoes => "esquecer_cartoes",
            Self::TarefaComposta => "tarefa_composta",
            Self::Faq => "faq",
            Self::Calcular => "calcular",
            Self::RecargaAutomatica => "recarga_automatica",
            Self::VerificarPagamento => "verificar_pagamento",
            Self::ConsultarSituacao => "consultar_situacao",
            Self::Extrato => "extrato",
        }
    }

    pub(crate) fn of(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.key() == key)
    }
}

/// An intent whose parameters the router gathers from the messages, asking for what is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WithParams {
    Saldo,
    Recarga,
    Situacao,
    Extrato,
}

impl WithParams {
    pub(crate) fn of(intent: Known) -> Option<Self> {
        match intent {
            Known::ConsultarSaldo => Some(Self::Saldo),
            Known::PrepararRecarga => Some(Self::Recarga),
            Known::ConsultarSituacao => Some(Self::Situacao),
            Known::Extrato => Some(Self::Extrato),
            _ => None,
        }
    }

    pub(crate) fn intent(self) -> Known {
        match self {
            Self::Saldo => Known::ConsultarSaldo,
            Self::Recarga => Known::PrepararRecarga,
            Self::Situacao => Known::ConsultarSituacao,
            Self::Extrato => Known::Extrato,
        }
    }

    /// The parameters its action needs.
    pub(crate) fn required(self) -> &'static [&'static str] {
        match self {
            Self::Saldo | Self::Situacao | Self::Extrato => &["cartao"],
            Self::Recarga => &["cartao", "valor", "meio_pagamento"],
        }
    }

    /// How its question begins.
    pub(crate) fn purpose(self) -> &'static str {
        match self {
            Self::Saldo => "Para consultar o saldo",
            Self::Recarga => "Para a recarga",
            Self::Situacao => "Para ver a situação do cartão",
            Self::Extrato => "Para o extrato",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_intent_is_found_by_its_key() {
        for k in Known::ALL {
            assert_eq!(Known::of(k.key()), Some(k));
        }
        assert_eq!(Known::of("general_chat"), None);
    }
}
