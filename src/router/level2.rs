//! Level 2: one micro call that picks an intent, and the check that a model can only make the answer
//! better. The label is asked for the way the provider constrains it (a JSON-schema enum, a forced
//! tool), with a few examples from the corpus; it is cached by model and normalised message. An
//! intent is **accepted only when the message and the conversation support it** — confirming or
//! cancelling with nothing waiting, a recharge with no amount or card anywhere, a person asked for
//! with no such wish fall back to `general_chat` (the design note's "Fallback": a deterministic
//! action that cannot act is the model's to answer).

use std::time::Instant;

use sha2::{Digest, Sha256};
use vt_domain::tools::cartao::remembered_in;
use vt_domain::tools::{STATE_CARTAO, STATE_PIX};
use vt_domain::vt::parse::normalize;

use super::known::Known;
use super::{Read, Router, keywords};
use vt_engine::Conversation;
use vt_engine::llm::{ChatMessage, Choice, CompletionRequest, LlmProvider};

/// A few messages written as the corpus's (`tests/fixtures/router/corpus.yaml`) and the eval cases'
/// are, with their intents: enough for a small model to see the labels used, few enough for a micro
/// call. Open questions are among them as `general_chat`: the label a small model missed most.
const EXAMPLES: &[(&str, &str)] = &[
    ("qto tem no vt 1234567890", "consultar_saldo"),
    ("meu cartao 1234567890 ta zerado?", "consultar_saldo"),
    ("coloca 50 no 1234567890 no pix", "preparar_recarga"),
    ("quero falar com um atendente", "transferir_para_humano"),
    ("era so isso, valeu", "encerrar_atendimento"),
    (
        "e se eu trocar de cidade, o vale continua valendo?",
        "general_chat",
    ),
    (
        "o onibus cobrou duas vezes a passagem, isso é normal?",
        "general_chat",
    ),
    (
        "compara o saldo do 1111111111 com o do 1234567890",
        "tarefa_composta",
    ),
];

/// The field the label comes in.
const FIELD: &str = "intencao";

impl Router {
    /// The active intents a model may pick (the ones only level 1 gives are not offered).
    fn options(&self) -> Vec<String> {
        self.intents
            .iter()
            .filter(|i| i.is_active)
            .filter(|i| !matches!(Known::of(&i.intent_key), Some(Known::Faq | Known::Calcular)))
            .map(|i| i.intent_key.clone())
            .collect()
    }

    /// One micro call, cached by model and normalised message: `(intent, tokens, called)`.
    pub(super) async fn level2(&self, llm: &dyn LlmProvider, text: &str) -> (String, (u64, u64), bool) {
        let key = hex::encode(Sha256::digest(
            format!("{}\n{}", llm.model(), normalize(text)).as_bytes(),
        ));
        if let Some((intent, at)) = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .cloned()
            && at.elapsed() < self.cache_ttl
        {
            return (intent, (0, 0), false);
        }
        let list: Vec<String> = self
            .intents
            .iter()
            .filter(|i| self.options().contains(&i.intent_key))
            .map(|i| format!("- {}: {}", i.intent_key, i.description))
            .collect();
        let examples: Vec<String> = EXAMPLES.iter().map(|(t, i)| format!("\"{t}\" → {i}")).collect();
        let choice = Choice {
            field: FIELD.into(),
            options: self.options(),
        };
        let request = CompletionRequest {
            system: format!(
                "Classifique a mensagem do usuário em UMA das intenções abaixo. Uma pergunta aberta, uma dúvida \
                 ou qualquer coisa que não seja claramente um pedido da lista é general_chat.\n{}\n\nExemplos:\n{}",
                list.join("\n"),
                examples.join("\n")
            ),
            messages: vec![ChatMessage::user(text.chars().take(500).collect::<String>())],
            max_tokens: Some(24),
            choice: Some(choice.clone()),
            ..Default::default()
        };
        match vt_engine::telemetry::spans::complete("classificar_intencao", llm, &request).await {
            Ok(c) => {
                let found = c.choice(&choice).unwrap_or_else(|| "general_chat".to_owned());
                self.cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(key, (found.clone(), Instant::now()));
                (found, (c.usage.input_tokens, c.usage.output_tokens), true)
            }
            Err(e) => {
                tracing::warn!(error = %e, "intent classification failed; treating as general chat");
                ("general_chat".into(), (0, 0), true)
            }
        }
    }
}

/// Whether the message and the conversation support the intent a model picked.
pub(super) fn supported(intent: Known, m: &Read<'_>, conv: &Conversation) -> bool {
    let n = m.n.as_str();
    let card = !m.found.cards.is_empty() || m.found.final_digits.is_some();
    let remembered = !remembered_in(&conv.memory).is_empty();
    match intent {
        // A yes or a no answers something waiting: with nothing waiting there is nothing to answer.
        Known::ConfirmarRecarga | Known::CancelarRecarga => m.waiting,
        // A new code is for a code or link already shown.
        Known::NovoCodigoPix => [STATE_PIX, STATE_CARTAO]
            .iter()
            .any(|k| conv.state.get(*k).is_some_and(|v| !v.is_null())),
        // A recharge names an amount or a card, or answers a request waiting for one.
        Known::PrepararRecarga => {
            !m.found.amounts.is_empty() || card || conv.state.contains_key(super::STATE_AGUARDANDO)
        }
        // A balance is of a card named or remembered, asked about in so many words.
        Known::ConsultarSaldo => card || (remembered && keywords::mentions_credit(n)),
        Known::TransferirParaHumano => keywords::wishes_person(n),
        Known::EncerrarAtendimento => keywords::is_goodbye(n) || keywords::is_thanks(n),
        Known::MeusCartoes | Known::EsquecerCartoes => keywords::mentions_card(n),
        Known::TarefaComposta => m.found.cards.len() >= 2 || remembered_in(&conv.memory).len() >= 2,
        Known::Ajuda => keywords::is_greeting(n),
        Known::Faq | Known::Calcular => false,
        // A recharge by itself, in so many words; the model then calls its tool with the terms.
        Known::RecargaAutomatica => vt_domain::vt::parse::speaks_of_automatic_in(n),
        // A complaint about a payment names one.
        Known::VerificarPagamento => keywords::mentions_payment(n),
        // A card's situation or statement is of a card named, remembered, or spoken of.
        Known::ConsultarSituacao | Known::Extrato | Known::BloquearCartao | Known::SegundaVia => {
            card || remembered || keywords::mentions_card(n)
        }
        // An answer to a block or second copy is read by code, never by a classification.
        Known::ConfirmarPedidoCartao => false,
    }
}
