//! How conversations ended, counted: per day (the policy's time zone), tenant and intent for `vt-agent
//! usage --desfechos` and the console, per tenant for `/metrics`. A rate is a share of the stretches
//! that ended; the scores are split between what the bot resolved and what a person did; the cost
//! per resolved case is what every stretch of the group cost over the resolved ones (unknown when any
//! had no price).

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Serialize;

use vt_store::{Desfecho, OutcomeRecord};

/// The outcomes of a group of stretches.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Tally {
    pub total: usize,
    pub pelo_bot: usize,
    pub por_pessoa: usize,
    pub abandonadas: usize,
    pub sem_objetivo: usize,
    /// The same person came back on the same subject within 7 days.
    pub reabertas: usize,
    /// Scores of what the bot resolved: `(sum, count)`.
    notas_bot: (i64, usize),
    /// Scores of what a person resolved: `(sum, count)`.
    notas_pessoa: (i64, usize),
    cost_known: Decimal,
    cost_unknown: usize,
}

impl Tally {
    pub(crate) fn add(&mut self, o: &OutcomeRecord) {
        self.total += 1;
        match o.desfecho {
            Desfecho::ResolvidaPeloBot => self.pelo_bot += 1,
            Desfecho::ResolvidaPorPessoa => self.por_pessoa += 1,
            Desfecho::Abandonada => self.abandonadas += 1,
            Desfecho::SemObjetivo => self.sem_objetivo += 1,
        }
        self.reabertas += usize::from(o.reaberta);
        if let Some(nota) = o.nota {
            let scores = match o.desfecho {
                Desfecho::ResolvidaPorPessoa => &mut self.notas_pessoa,
                _ => &mut self.notas_bot,
            };
            scores.0 += i64::from(nota);
            scores.1 += 1;
        }
        match o.custo_micro_brl {
            Some(micro) => self.cost_known += crate::costs::from_micro_brl(micro),
            None => self.cost_unknown += 1,
        }
    }

    /// `part` of the total, in percent (one decimal).
    pub(crate) fn pct(&self, part: usize) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        (part as f64 * 1000.0 / self.total as f64).round() / 10.0
    }

    /// The mean score of what the bot resolved (one decimal), when any was scored.
    pub(crate) fn nota_bot(&self) -> Option<f64> {
        mean(self.notas_bot)
    }

    /// The mean score of what a person resolved, when any was scored.
    pub(crate) fn nota_pessoa(&self) -> Option<f64> {
        mean(self.notas_pessoa)
    }

    pub(crate) fn resolved(&self) -> usize {
        self.pelo_bot + self.por_pessoa
    }

    /// What the group cost over its resolved stretches; `None` when none was resolved or a cost is
    /// unknown.
    pub(crate) fn per_resolved(&self) -> Option<Decimal> {
        (self.cost_unknown == 0 && self.resolved() > 0)
            .then(|| self.cost_known / Decimal::from(self.resolved()))
    }
}

fn mean((sum, n): (i64, usize)) -> Option<f64> {
    (n > 0).then(|| (sum as f64 * 10.0 / n as f64).round() / 10.0)
}

/// A group: day, tenant, intent.
pub(crate) type Group = (chrono::NaiveDate, String, String);

/// `records` from `first` on (a day in `tz`), per day, tenant and main intent, oldest first.
pub(crate) fn by_day(
    records: &[OutcomeRecord],
    tz: &vt_domain::vt::timezone::Timezone,
    first: chrono::NaiveDate,
) -> Vec<(Group, Tally)> {
    let mut by: BTreeMap<Group, Tally> = BTreeMap::new();
    for o in records {
        let day = tz.local(o.ate).date_naive();
        if day < first {
            continue;
        }
        by.entry((day, o.tenant_id.clone(), o.intencao.clone()))
            .or_default()
            .add(o);
    }
    by.into_iter().collect()
}

/// `records` per tenant.
pub(crate) fn by_tenant(records: &[OutcomeRecord]) -> BTreeMap<String, Tally> {
    let mut by: BTreeMap<String, Tally> = BTreeMap::new();
    for o in records {
        by.entry(o.tenant_id.clone()).or_default().add(o);
    }
    by
}

/// A row as the console shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Line {
    pub dia: String,
    pub tenant: String,
    pub intencao: String,
    pub total: usize,
    pub pelo_bot: f64,
    pub por_pessoa: f64,
    pub abandonadas: f64,
    pub sem_objetivo: f64,
    pub reabertas: f64,
    pub nota_bot: Option<f64>,
    pub nota_pessoa: Option<f64>,
    pub custo_por_resolvida: String,
}

impl Line {
    pub(crate) fn of(((day, tenant, intent), t): &(Group, Tally)) -> Self {
        Self {
            dia: day.format("%d/%m/%Y").to_string(),
            tenant: tenant.clone(),
            intencao: intent.clone(),
            total: t.total,
            pelo_bot: t.pct(t.pelo_bot),
            por_pessoa: t.pct(t.por_pessoa),
            abandonadas: t.pct(t.abandonadas),
            sem_objetivo: t.pct(t.sem_objetivo),
            reabertas: t.pct(t.reabertas),
            nota_bot: t.nota_bot(),
            nota_pessoa: t.nota_pessoa(),
            custo_por_resolvida: per_resolved(t),
        }
    }
}

fn per_resolved(t: &Tally) -> String {
    match (t.resolved(), t.per_resolved()) {
        (0, _) => "—".into(),
        (_, cost) => crate::costs::reais(cost),
    }
}

/// The groups as a terminal table, with a total line.
pub(crate) fn table(groups: &[(Group, Tally)]) -> String {
    let header = [
        "dia",
        "tenant",
        "intenção",
        "atendimentos",
        "pelo bot",
        "por pessoa",
        "abandonadas",
        "sem objetivo",
        "reabertas",
        "nota bot",
        "nota pessoa",
        "custo por resolvida",
    ];
    let row = |(day, tenant, intent): (String, String, String), t: &Tally| {
        let pct = |part| format!("{}%", t.pct(part)).replace('.', ",");
        let nota = |n: Option<f64>| n.map_or("—".into(), |n| format!("{n:.1}").replace('.', ","));
        [
            day,
            tenant,
            intent,
            t.total.to_string(),
            pct(t.pelo_bot),
            pct(t.por_pessoa),
            pct(t.abandonadas),
            pct(t.sem_objetivo),
            pct(t.reabertas),
            nota(t.nota_bot()),
            nota(t.nota_pessoa()),
            per_resolved(t),
        ]
    };
    let mut lines: Vec<[String; 12]> = groups
        .iter()
        .map(|((day, tenant, intent), t)| {
            row(
                (day.format("%d/%m/%Y").to_string(), tenant.clone(), intent.clone()),
                t,
            )
        })
        .collect();
    let mut all = Tally::default();
    for (_, t) in groups {
        all.total += t.total;
        all.pelo_bot += t.pelo_bot;
        all.por_pessoa += t.por_pessoa;
        all.abandonadas += t.abandonadas;
        all.sem_objetivo += t.sem_objetivo;
        all.reabertas += t.reabertas;
        all.notas_bot = (all.notas_bot.0 + t.notas_bot.0, all.notas_bot.1 + t.notas_bot.1);
        all.notas_pessoa = (
            all.notas_pessoa.0 + t.notas_pessoa.0,
            all.notas_pessoa.1 + t.notas_pessoa.1,
        );
        all.cost_known += t.cost_known;
        all.cost_unknown += t.cost_unknown;
    }
    lines.push(row(("total".into(), String::new(), String::new()), &all));
    super::grid(&header, &lines, 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(ate: &str, intent: &str, desfecho: Desfecho) -> OutcomeRecord {
        OutcomeRecord {
            id: format!("d-{ate}-{intent}"),
            conversation_id: "c".into(),
            tenant_id: "acme".into(),
            channel: "whatsapp".into(),
            desde: None,
            ate: ate.parse().expect("time"),
            desfecho,
            intencao: intent.into(),
            assunto: intent.into(),
            caso_id: None,
            custo_micro_brl: Some(30_000),
            reaberta: false,
            reabre: None,
            pesquisa_em: None,
            nota: None,
            created_at: ate.parse().expect("time"),
        }
    }

    #[test]
    fn rates_scores_and_the_cost_per_resolved_case() {
        let tz = vt_domain::vt::timezone::Timezone::sao_paulo();
        let mut scored = outcome(
            "2026-11-22T15:00:00Z",
            "consultar_saldo",
            Desfecho::ResolvidaPeloBot,
        );
        scored.nota = Some(4);
        scored.reaberta = true;
        let mut person = outcome(
            "2026-11-22T16:00:00Z",
            "consultar_saldo",
            Desfecho::ResolvidaPorPessoa,
        );
        person.nota = Some(2);
        let records = [
            scored,
            person,
            outcome("2026-11-22T17:00:00Z", "consultar_saldo", Desfecho::Abandonada),
            outcome("2026-11-22T18:00:00Z", "consultar_saldo", Desfecho::SemObjetivo),
            // 02:00 UTC is the 22nd in São Paulo still.
            outcome(
                "2026-11-23T02:00:00Z",
                "preparar_recarga",
                Desfecho::ResolvidaPeloBot,
            ),
        ];
        let first = "2026-11-22".parse().expect("day");
        let groups = by_day(&records, &tz, first);
        assert_eq!(groups.len(), 2, "{groups:?}");
        let (_, balance) = &groups[0];
        assert_eq!((balance.total, balance.pct(balance.pelo_bot)), (4, 25.0));
        assert_eq!(balance.pct(balance.reabertas), 25.0);
        assert_eq!(
            (balance.nota_bot(), balance.nota_pessoa()),
            (Some(4.0), Some(2.0))
        );
        // Four stretches at R$ 0,03 over two resolved.
        assert_eq!(balance.per_resolved(), Some(Decimal::new(6, 2)));
        let text = table(&groups);
        assert!(text.contains("25%") && text.contains("R$ 0,06"), "{text}");
        let total = text.lines().last().expect("total");
        assert!(total.starts_with("total") && total.contains(" 5 "), "{total}");
    }

    #[test]
    fn an_unknown_cost_makes_the_cost_per_resolved_case_unknown() {
        let mut t = Tally::default();
        t.add(&outcome(
            "2026-11-22T15:00:00Z",
            "consultar_saldo",
            Desfecho::ResolvidaPeloBot,
        ));
        let mut unpriced = outcome("2026-11-22T16:00:00Z", "consultar_saldo", Desfecho::Abandonada);
        unpriced.custo_micro_brl = None;
        t.add(&unpriced);
        assert_eq!(t.per_resolved(), None);
        assert_eq!(per_resolved(&t), "desconhecido");
        assert_eq!(per_resolved(&Tally::default()), "—");
    }
}
