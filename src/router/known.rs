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
    /// A lost, stolen or damaged card blocked, after the holder's yes.
    BloquearCartao,
    /// A new card for a blocked one, its balance moved, after the holder's yes.
    SegundaVia,
    /// The holder's answer to a block or second copy waiting (yes, no, the check's digits).
    ConfirmarPedidoCartao,
}

impl Known {
    const ALL: [Self; 20] = [
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
        Self::BloquearCartao,
        Self::SegundaVia,
        Self::ConfirmarPedidoCartao,
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
            Self::BloquearCartao => "bloquear_cartao",
            Self::SegundaVia => "pedir_segunda_via",
            Self::ConfirmarPedidoCartao => "confirmar_pedido_cartao",
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
    Bloqueio,
    SegundaVia,
}

impl WithParams {
    pub(crate) fn of(intent: Known) -> Option<Self> {
        match intent {
            Known::ConsultarSaldo => Some(Self::Saldo),
            Known::PrepararRecarga => Some(Self::Recarga),
            Known::ConsultarSituacao => Some(Self::Situacao),
            Known::Extrato => Some(Self::Extrato),
            Known::BloquearCartao => Some(Self::Bloqueio),
            Known::SegundaVia => Some(Self::SegundaVia),
            _ => None,
        }
    }

    pub(crate) fn intent(self) -> Known {
        match self {
            Self::Saldo => Known::ConsultarSaldo,
            Self::Recarga => Known::PrepararRecarga,
            Self::Situacao => Known::ConsultarSituacao,
            Self::Extrato => Known::Extrato,
            Self::Bloqueio => Known::BloquearCartao,
            Self::SegundaVia => Known::SegundaVia,
        }
    }

    /// The parameters its action needs.
    pub(crate) fn required(self) -> &'static [&'static str] {
        match self {
            Self::Saldo | Self::Situacao | Self::Extrato | Self::Bloqueio | Self::SegundaVia => &["cartao"],
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
            Self::Bloqueio => "Para bloquear o cartão",
            Self::SegundaVia => "Para a segunda via",
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
