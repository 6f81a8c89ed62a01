//! The magic cards: how the simulated systems answer for each card, as a payment provider's test mode
//! has test card numbers for every branch, and a fixture file that adds or replaces them.

use std::collections::HashMap;

use rust_decimal::Decimal;
use rust_decimal::dec;
use serde::{Deserialize, Serialize};

/// How the balance API answers for a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BalanceMode {
    Ok,
    Nulo,
    Erro500,
    SemResposta,
    OutroCartao,
    SemMoedaData,
}

/// How the recharge API answers for a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RechargeMode {
    Aprovada,
    Pendente,
    /// 202 `pendente` first; the same request sent again (same key, same body) finds it approved: the
    /// charge happens then, once.
    PendenteDepoisAprovada,
    Negada,
    Erro500,
    TimeoutAposCobranca,
    AprovadaSemSaldo,
    AprovadaSemIds,
}

/// How the card's holder pays a Pix charge of the simulated provider, or a recharge's boleto, when
/// they pay by themselves ([`super::SimulatorConfig::pix_pagar_apos`], [`super::SimulatorConfig::boleto_pagar_apos`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PixPayer {
    /// Pays, and the provider tells the webhook.
    #[default]
    Paga,
    /// Never pays: the charge expires, the boleto falls due.
    NuncaPaga,
    /// Pays, and the provider's notice never comes (the product's sweep finds the payment); a boleto
    /// is paid as by [`Self::Paga`] (no notice comes for one anyway).
    PagaSemAviso,
    /// Pays a code as [`Self::Paga`] does; a Pix Automático charge's first attempt fails for
    /// insufficient funds in the payer's account (its retry pays).
    SemSaldoNaConta,
}

/// What the card system says of a card's situation ([`vt_domain::systems::SITUACAO_ENDPOINT`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SituationMode {
    #[default]
    Ativo,
    /// Blocked for loss three days before now.
    Bloqueado,
    /// Replaced or closed.
    Cancelado,
    /// Active, with R$ 50,00 bought a day ago waiting to be validated on board (three days to do it).
    CreditoPendente,
    /// Active, the day's use limit reached (uses again at midnight).
    LimiteDiario,
    /// The system does not know the card: 404 on its situation and statement.
    Desconhecido,
}

/// How the card system answers a second copy of the card, once it is blocked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplacementMode {
    /// R$ 15,00, paid before the order goes; picked up in five working days.
    #[default]
    Paga,
    /// No fee.
    Gratuita,
    /// A person must see documents first: 422 `precisa_atendimento`.
    PrecisaAtendimento,
}

/// A card's behaviour (the magic table, or a fixture).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CardBehavior {
    #[serde(with = "vt_domain::vt::input::money_serde")]
    pub saldo: Decimal,
    pub saldo_api: BalanceMode,
    pub recarga: RechargeMode,
    pub pix: PixPayer,
    pub situacao: SituationMode,
    /// Days of a commuter's past uses and credits in its statement (before anything this run did).
    pub historico_dias: u32,
    pub segunda_via: ReplacementMode,
}

impl Default for CardBehavior {
    fn default() -> Self {
        Self {
            saldo: dec!(50.00),
            saldo_api: BalanceMode::Ok,
            recarga: RechargeMode::Aprovada,
            pix: PixPayer::Paga,
            situacao: SituationMode::Ativo,
            historico_dias: 0,
            segunda_via: ReplacementMode::Paga,
        }
    }
}

/// The first digits of the second copies the simulator issues (`30` and eight more): they start with
/// no balance of their own, only what was transferred to them.
pub(crate) const NEW_CARD_PREFIX: &str = "30";

/// How a card behaves where no table names it: as `CardBehavior::default()`, but for a second copy the
/// simulator issued, which starts empty.
pub(crate) fn unnamed(cartao: &str) -> CardBehavior {
    if cartao.len() == 10 && cartao.starts_with(NEW_CARD_PREFIX) {
        return CardBehavior {
            saldo: Decimal::ZERO,
            ..CardBehavior::default()
        };
    }
    CardBehavior::default()
}

/// The magic cards of SPEC §7. Any other valid card behaves as `CardBehavior::default()`.
pub fn magic_cards() -> HashMap<String, CardBehavior> {
    let b = |saldo_api, recarga| CardBehavior {
        saldo_api,
        recarga,
        ..CardBehavior::default()
    };
    let situated = |situacao| CardBehavior {
        situacao,
        ..CardBehavior::default()
    };
    let payer = |pix| CardBehavior {
        pix,
        ..CardBehavior::default()
    };
    use BalanceMode as B;
    use RechargeMode as R;
    HashMap::from([
        (
            "1111111111".into(),
            CardBehavior {
                saldo: dec!(12.50),
                ..CardBehavior::default()
            },
        ),
        ("2222222222".into(), b(B::Nulo, R::Aprovada)),
        ("3333333333".into(), b(B::Erro500, R::Aprovada)),
        ("4444444444".into(), b(B::SemResposta, R::Aprovada)),
        ("5555555555".into(), b(B::OutroCartao, R::Aprovada)),
        ("6666666666".into(), b(B::Ok, R::Pendente)),
        ("6161616161".into(), b(B::Ok, R::PendenteDepoisAprovada)),
        ("7777777777".into(), b(B::Ok, R::Negada)),
        ("8888888888".into(), b(B::Ok, R::Erro500)),
        ("9999999999".into(), b(B::Ok, R::TimeoutAposCobranca)),
        ("1212121212".into(), b(B::Ok, R::AprovadaSemSaldo)),
        ("1313131313".into(), b(B::Ok, R::AprovadaSemIds)),
        ("1414141414".into(), b(B::SemMoedaData, R::Aprovada)),
        ("1515151515".into(), payer(PixPayer::NuncaPaga)),
        ("1616161616".into(), payer(PixPayer::PagaSemAviso)),
        ("1717171717".into(), payer(PixPayer::SemSaldoNaConta)),
        ("1818181818".into(), situated(SituationMode::Bloqueado)),
        ("1919191919".into(), situated(SituationMode::CreditoPendente)),
        ("2020202020".into(), situated(SituationMode::LimiteDiario)),
        ("2121212121".into(), situated(SituationMode::Cancelado)),
        ("2323232323".into(), situated(SituationMode::Desconhecido)),
        (
            "2525252525".into(),
            CardBehavior {
                situacao: SituationMode::Bloqueado,
                segunda_via: ReplacementMode::PrecisaAtendimento,
                ..CardBehavior::default()
            },
        ),
        (
            "2626262626".into(),
            CardBehavior {
                segunda_via: ReplacementMode::Gratuita,
                ..CardBehavior::default()
            },
        ),
        (
            "2424242424".into(),
            CardBehavior {
                saldo: dec!(0.00),
                historico_dias: 45,
                ..CardBehavior::default()
            },
        ),
    ])
}

/// A fixture file: `{"replace": false, "cards": {"1234567890": {"saldo": 75.0, "recarga": "negada"}}}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Fixture {
    #[serde(default)]
    pub(crate) replace: bool,
    pub(crate) cards: HashMap<String, CardBehavior>,
}
