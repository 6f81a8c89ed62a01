//! `buscar_faq`: the operator's answers to the question, for the model to ground its answer in.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::faq::SharedFaq;
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToAgent};

pub struct BuscarFaq;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// A pergunta do usuário, com as palavras dele.
    pub pergunta: String,
}

/// Passages given to the model: enough to answer, few enough to keep the call small.
const PASSAGES: usize = 2;

#[async_trait]
impl Action for BuscarFaq {
    type Args = Args;

    const NAME: &'static str = "buscar_faq";
    const DESCRIPTION: &'static str = "Busca as respostas oficiais da empresa para uma dúvida sobre o vale-transporte (catraca, \
         prazos, mudança de emprego, segunda via, meios de pagamento). Responda só com o que as \
         passagens dizem.";

    fn retry_safe(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let hits = ctx
            .get::<SharedFaq>()
            .map(|faq| {
                faq.0
                    .search(&args.pergunta, PASSAGES)
                    .into_iter()
                    .filter(|h| h.matched > 0)
                    .map(|h| faq.0.entries()[h.entry].clone())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        if hits.is_empty() {
            return Ok(ResponseToAgent::new(
                "Nenhuma resposta oficial para essa dúvida. Não invente: diga que não tem essa informação e \
                 ofereça falar com uma pessoa (transferir_para_humano).",
            )
            .into());
        }
        let passages: Vec<String> = hits
            .iter()
            .map(|e| format!("[{}] {}\n{}", e.id, e.titulo, e.resposta))
            .collect();
        Ok(ResponseToAgent::new(format!(
            "Respostas oficiais (responda só com o que está aqui, com as suas palavras):\n\n{}",
            passages.join("\n\n")
        ))
        .into())
    }
}
