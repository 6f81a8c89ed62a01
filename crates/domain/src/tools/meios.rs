//! Which means of payment a chat recharge may use here. A recharge paid by Pix or by card goes to the
//! recharge system only with its payment (a Pix charge paid, a card paid on a provider's checkout):
//! where recharges go to real systems but no provider takes that means, the recharge would be credited
//! unpaid, so it is refused before anything is prepared and the card holder is offered the means that
//! are taken. Boleto is always taken: the recharge system issues the boleto itself.

use vt_contract::response::ResponseToUser;

/// The means a chat recharge may not use here, put in the tools' context by the composition root.
/// Absent (tests, the embedded simulator), every means is taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MeiosIndisponiveis {
    /// No Pix provider (`[pix]`) beside real systems.
    pub pix: bool,
    /// No card-payment provider beside real systems.
    pub cartao_credito: bool,
}

impl MeiosIndisponiveis {
    /// Whether a recharge paid by `meio` (normalised: `pix`, `boleto`, `cartao_credito`) is refused.
    pub fn recusa(&self, meio: &str) -> bool {
        match meio {
            "pix" => self.pix,
            "cartao_credito" => self.cartao_credito,
            _ => false,
        }
    }

    /// What the card holder is told of a recharge paid by `meio` that is refused: the means that are
    /// taken here, in words.
    pub(crate) fn resposta(&self, meio: &str) -> ResponseToUser {
        let nome = match meio {
            "pix" => "por Pix",
            _ => "no cartão de crédito",
        };
        let mut aceitos = vec!["no boleto"];
        if !self.pix && meio != "pix" {
            aceitos.push("por Pix");
        }
        if !self.cartao_credito && meio != "cartao_credito" {
            aceitos.push("no cartão de crédito");
        }
        let oferta = match aceitos.as_slice() {
            [um] => format!("Posso fazer a recarga {um}, se quiser."),
            [primeiros @ .., ultimo] => format!(
                "Posso fazer a recarga {} ou {ultimo}: é só dizer qual.",
                primeiros.join(", ")
            ),
            [] => String::new(),
        };
        ResponseToUser::new(
            format!("O pagamento {nome} ainda não está disponível por aqui. {oferta}"),
            format!(
                "Recarga paga {nome} recusada: não há provedor desse meio de pagamento configurado, e a recarga \
                 não é enviada sem pagamento. Nada foi preparado nem cobrado. Meios aceitos: {}.",
                aceitos.join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_means_names_the_ones_taken() {
        let sem_cartao = MeiosIndisponiveis {
            pix: false,
            cartao_credito: true,
        };
        assert!(
            sem_cartao.recusa("cartao_credito") && !sem_cartao.recusa("pix") && !sem_cartao.recusa("boleto")
        );
        let told = sem_cartao.resposta("cartao_credito").message;
        assert!(
            told.contains("cartão de crédito ainda não está disponível"),
            "{told}"
        );
        assert!(told.contains("no boleto ou por Pix"), "{told}");
        let nenhum = MeiosIndisponiveis {
            pix: true,
            cartao_credito: true,
        };
        let told = nenhum.resposta("pix").message;
        assert!(told.contains("Pix ainda não está disponível"), "{told}");
        assert!(
            told.contains("Posso fazer a recarga no boleto, se quiser."),
            "{told}"
        );
        assert!(!told.contains("cartão"), "{told}");
        assert!(!MeiosIndisponiveis::default().recusa("pix"));
    }
}
