//! What a turn costs in reais (`[custos]`): its model calls at the model's prices (input, cached
//! input, output, per million tokens) and the audio it transcribed (per minute), in the table's
//! currency turned into reais at its exchange rate; and what a paid WhatsApp message costs, by its
//! pricing category (a template outside the 24-hour window; `service` messages are free). A model or a price the table does not have makes
//! the cost **unknown** (`None`), never zero; a turn that called no model and heard nothing costs
//! exactly zero.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Deserialize;

/// `[custos]` in the configuration file.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CustosConfig {
    /// The currency of the prices (`USD`, as the providers publish them).
    pub moeda: String,
    /// Reais per unit of `moeda` (1 when the prices are in reais).
    pub cambio_brl: Decimal,
    /// Prices by model name; a model answers to the longest name it starts with
    /// (`gpt-4o-mini-2024-07-18` to `gpt-4o-mini`).
    pub modelos: BTreeMap<String, ModelPrice>,
    /// Price per message by WhatsApp pricing category (`marketing`, `utility`, `authentication`);
    /// `service` is free.
    pub whatsapp: BTreeMap<String, Decimal>,
}

impl Default for CustosConfig {
    fn default() -> Self {
        Self {
            moeda: "USD".into(),
            cambio_brl: Decimal::ONE,
            modelos: BTreeMap::new(),
            whatsapp: BTreeMap::new(),
        }
    }
}

/// WhatsApp's pricing categories.
const CATEGORIES: [&str; 4] = ["marketing", "utility", "authentication", "service"];

/// A model's prices in `[custos] moeda`: per million tokens, or per minute of audio.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ModelPrice {
    /// Per million input tokens, in `[custos] moeda`.
    pub entrada: Option<Decimal>,
    /// Input read from the provider's prompt cache.
    pub entrada_em_cache: Option<Decimal>,
    /// Input written to the provider's prompt cache (Anthropic bills it above plain input).
    pub entrada_escrita_cache: Option<Decimal>,
    /// Per million output tokens.
    pub saida: Option<Decimal>,
    /// Audio transcribed.
    pub por_minuto: Option<Decimal>,
}

/// One model call as it is priced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Call<'a> {
    /// The model that answered.
    pub model: &'a str,
    /// Every input token, the cached ones included.
    pub input: u64,
    /// Of `input`, read from the prompt cache.
    pub cached: u64,
    /// Of `input`, written to the prompt cache.
    pub written: u64,
    pub output: u64,
}

impl<'a> Call<'a> {
    /// A call with no cache.
    pub(crate) fn plain(model: &'a str, (input, output): (u64, u64)) -> Self {
        Self {
            model,
            input,
            output,
            ..Self::default()
        }
    }
}

/// What one turn used that has a price.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Used<'a> {
    pub calls: Vec<Call<'a>>,
    /// Milliseconds of audio transcribed, and the transcription model.
    pub audio: Option<(&'a str, i64)>,
}

const MILLION: Decimal = Decimal::from_parts(1_000_000, 0, 0, false, 0);

impl CustosConfig {
    /// A value that parses but cannot work, as `(field, why)`.
    pub(crate) fn problem(&self) -> Option<(String, &'static str)> {
        if self.cambio_brl <= Decimal::ZERO {
            return Some(("custos.cambio_brl".into(), "deve ser maior que zero"));
        }
        if self.moeda.len() != 3 || !self.moeda.chars().all(|c| c.is_ascii_uppercase()) {
            return Some(("custos.moeda".into(), "deve ser um código ISO 4217 (ex.: USD)"));
        }
        for (category, price) in &self.whatsapp {
            if !CATEGORIES.contains(&category.as_str()) {
                return Some((
                    format!("custos.whatsapp.{category}"),
                    "deve ser marketing, utility, authentication ou service",
                ));
            }
            if *price < Decimal::ZERO {
                return Some((format!("custos.whatsapp.{category}"), "não pode ser negativo"));
            }
        }
        for (name, price) in &self.modelos {
            let prices = [
                ("entrada", price.entrada),
                ("entrada_em_cache", price.entrada_em_cache),
                ("entrada_escrita_cache", price.entrada_escrita_cache),
                ("saida", price.saida),
                ("por_minuto", price.por_minuto),
            ];
            if let Some((field, _)) = prices.iter().find(|(_, p)| p.is_some_and(|p| p < Decimal::ZERO)) {
                return Some((format!("custos.modelos.{name}.{field}"), "não pode ser negativo"));
            }
        }
        None
    }

    /// The prices of `model`: the longest table name it starts with.
    fn price(&self, model: &str) -> Option<&ModelPrice> {
        self.modelos
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| price)
    }

    /// What `used` cost in reais; `None` when something in it has no price.
    pub(crate) fn brl(&self, used: &Used<'_>) -> Option<Decimal> {
        let mut total = Decimal::ZERO;
        for call in &used.calls {
            total += self.call(call)?;
        }
        if let Some((model, ms)) = used.audio.filter(|(_, ms)| *ms > 0) {
            let per_minute = self.price(model)?.por_minuto?;
            total += per_minute * Decimal::from(ms) / Decimal::from(60_000);
        }
        Some((total * self.cambio_brl).round_dp(6))
    }

    /// What one WhatsApp message of `category` (as Meta names it, any case) costs in reais: `service`
    /// is free; a category without a price is unknown.
    pub(crate) fn message_brl(&self, category: &str) -> Option<Decimal> {
        let category = category.to_ascii_lowercase();
        if category == "service" {
            return Some(Decimal::ZERO);
        }
        self.whatsapp
            .get(&category)
            .map(|price| (price * self.cambio_brl).round_dp(6))
    }

    /// One model call, in the table's currency.
    fn call(&self, c: &Call<'_>) -> Option<Decimal> {
        if c.input + c.output == 0 {
            return Some(Decimal::ZERO);
        }
        let price = self.price(c.model)?;
        let cached = c.cached.min(c.input);
        let written = c.written.min(c.input - cached);
        let tokens = |n: u64, per_million: Option<Decimal>| match n {
            0 => Some(Decimal::ZERO),
            n => Some(Decimal::from(n) * per_million? / MILLION),
        };
        Some(
            tokens(c.input - cached - written, price.entrada)?
                + tokens(cached, price.entrada_em_cache)?
                + tokens(written, price.entrada_escrita_cache)?
                + tokens(c.output, price.saida)?,
        )
    }
}

/// `brl` in millionths of a real, as the store keeps it.
pub(crate) fn micro_brl(brl: Decimal) -> i64 {
    use rust_decimal::prelude::ToPrimitive as _;
    (brl * MILLION).round().to_i64().unwrap_or(i64::MAX)
}

/// Millionths of a real as reais.
pub(crate) fn from_micro_brl(micro: i64) -> Decimal {
    Decimal::from(micro) / MILLION
}

/// Reais as people read them: `R$ 0,0123` (four places: a turn costs fractions of a cent), or
/// `desconhecido`.
pub(crate) fn reais(value: Option<Decimal>) -> String {
    match value {
        Some(v) => format!("R$ {}", v.round_dp(4).to_string().replace('.', ",")),
        None => "desconhecido".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;

    fn table() -> CustosConfig {
        toml::from_str(
            r#"
            moeda = "USD"
            cambio_brl = 5.0
            [modelos."gpt-4o-mini"]
            entrada = 0.15
            entrada_em_cache = 0.075
            saida = 0.60
            [modelos."gpt-4o"]
            entrada = 2.50
            saida = 10.00
            [modelos."whisper-1"]
            por_minuto = 0.006
            [modelos."claude-sonnet-4"]
            entrada = 3.00
            entrada_em_cache = 0.30
            entrada_escrita_cache = 3.75
            saida = 15.00
            [whatsapp]
            marketing = 0.0625
            utility = 0.0068
            "#,
        )
        .expect("table")
    }

    #[test]
    fn a_turn_costs_its_calls_and_audio_at_the_tables_prices_in_reais() {
        let t = table();
        // 10,000 input of which 4,000 cached, 500 output, on gpt-4o-mini; 30 s of audio.
        let used = Used {
            calls: vec![Call {
                cached: 4_000,
                ..Call::plain("gpt-4o-mini-2024-07-18", (10_000, 500))
            }],
            audio: Some(("whisper-1", 30_000)),
        };
        // (6,000 × 0.15 + 4,000 × 0.075 + 500 × 0.60) / 1e6 = 0.0015 USD; 0.5 min × 0.006 = 0.003 USD.
        assert_eq!(t.brl(&used), Some(dec!(0.0225)));
        assert_eq!(
            t.brl(&Used {
                calls: vec![Call::plain("gpt-4o-2024-08-06", (1_000_000, 0))],
                audio: None
            }),
            Some(dec!(12.5)),
            "the longest name it starts with"
        );
        // Anthropic: 10,000 in, 4,000 read from the cache and 2,000 written to it, 100 out.
        // (4,000 × 3 + 4,000 × 0.30 + 2,000 × 3.75 + 100 × 15) / 1e6 = 0.0222 USD × 5.
        let anthropic = Call {
            cached: 4_000,
            written: 2_000,
            ..Call::plain("claude-sonnet-4-20250514", (10_000, 100))
        };
        assert_eq!(
            t.brl(&Used {
                calls: vec![anthropic],
                audio: None
            }),
            Some(dec!(0.111))
        );
    }

    #[test]
    fn a_missing_price_is_unknown_never_zero() {
        let t = table();
        let unknown = |calls: Vec<Call<'_>>| t.brl(&Used { calls, audio: None });
        assert_eq!(
            unknown(vec![Call::plain("mistral-large", (100, 10))]),
            None,
            "a model not in the table"
        );
        let cached = Call {
            cached: 50,
            ..Call::plain("gpt-4o", (100, 10))
        };
        assert_eq!(unknown(vec![cached]), None, "cached input without its price");
        let written = Call {
            written: 50,
            ..Call::plain("gpt-4o-mini", (100, 10))
        };
        assert_eq!(unknown(vec![written]), None, "cache writes without their price");
        assert_eq!(
            t.brl(&Used {
                calls: vec![],
                audio: Some(("gpt-4o-mini", 1_000))
            }),
            None,
            "audio without a per-minute price"
        );
        assert_eq!(
            t.brl(&Used::default()),
            Some(Decimal::ZERO),
            "no model, no audio: zero, known"
        );
        assert_eq!(t.message_brl("UTILITY"), Some(dec!(0.034)), "0.0068 USD × 5");
        assert_eq!(
            t.message_brl("service"),
            Some(Decimal::ZERO),
            "free, priced or not"
        );
        assert_eq!(t.message_brl("AUTHENTICATION"), None, "no price: unknown");
        assert_eq!(reais(None), "desconhecido");
        assert_eq!(reais(Some(dec!(0.02254))), "R$ 0,0225");
    }

    #[test]
    fn problems_name_their_field() {
        assert_eq!(CustosConfig::default().problem(), None);
        let mut t = table();
        t.cambio_brl = Decimal::ZERO;
        assert_eq!(t.problem().map(|p| p.0), Some("custos.cambio_brl".into()));
        let mut t = table();
        t.modelos.get_mut("gpt-4o").expect("model").saida = Some(dec!(-1));
        assert_eq!(
            t.problem().map(|p| p.0),
            Some("custos.modelos.gpt-4o.saida".into())
        );
        let mut t = table();
        t.whatsapp.insert("promo".into(), dec!(1));
        assert_eq!(t.problem().map(|p| p.0), Some("custos.whatsapp.promo".into()));
        let mut t = table();
        t.moeda = "dolar".into();
        assert_eq!(t.problem().map(|p| p.0), Some("custos.moeda".into()));
    }
}
