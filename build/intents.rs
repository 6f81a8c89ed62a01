//! Trains the router's intent classifier from the corpus (`corpus/intencoes/treino/`) at build time and
//! writes it for `include_bytes!` (`src/router/classifier/mod.rs` reads it).
//!
//! A multinomial logistic regression over hashed words, word pairs and letters' n-grams (fastText's
//! features without its embeddings): each written message and the generator's variants of it, a fixed
//! number of passes of stochastic gradient descent with a learning rate that falls to zero, shuffled
//! by a seeded generator — the same corpus gives the same weights on every machine. The weights are
//! kept only for features training saw, quantised to one byte.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use crate::augment::{Seeded, variants};
use crate::features::features;

const EPOCHS: usize = 12;
const LEARNING_RATE: f32 = 0.8;

fn seed_of(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Trains on `corpus` and writes the model to `out`.
pub(crate) fn train(corpus: &[(String, String)], out: &Path) {
    let mut labels: Vec<String> = corpus.iter().map(|(l, _)| l.clone()).collect();
    labels.sort();
    labels.dedup();
    let label_of: HashMap<&str, usize> = labels.iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut examples: Vec<(Vec<usize>, usize)> = Vec::new();
    for (label, text) in corpus {
        let y = label_of[label.as_str()];
        let mut texts = vec![text.clone()];
        texts.extend(variants(text, seed_of(text)));
        for t in texts {
            let feats = features(&t)
                .into_iter()
                .map(|b| {
                    let next = index.len();
                    *index.entry(b).or_insert(next)
                })
                .collect();
            examples.push((feats, y));
        }
    }
    let classes = labels.len();
    let mut w = vec![0f32; index.len() * classes];
    let mut bias = vec![0f32; classes];
    let mut rng = Seeded::new(7);
    let total = (EPOCHS * examples.len()) as f32;
    let mut step = 0f32;
    let mut p = vec![0f32; classes];
    for _ in 0..EPOCHS {
        // Fisher–Yates with the seeded generator.
        for i in (1..examples.len()).rev() {
            examples.swap(i, rng.below(i + 1));
        }
        for (feats, y) in &examples {
            let lr = LEARNING_RATE * (1.0 - step / total);
            step += 1.0;
            let value = 1.0 / (feats.len().max(1) as f32).sqrt();
            p.copy_from_slice(&bias);
            for &f in feats {
                let row = &w[f * classes..(f + 1) * classes];
                for (pc, wc) in p.iter_mut().zip(row) {
                    *pc += wc * value;
                }
            }
            softmax(&mut p);
            p[*y] -= 1.0;
            for (b, g) in bias.iter_mut().zip(&p) {
                *b -= lr * g;
            }
            for &f in feats {
                let row = &mut w[f * classes..(f + 1) * classes];
                for (wc, g) in row.iter_mut().zip(&p) {
                    *wc -= lr * g * value;
                }
            }
        }
    }
    write(out, &labels, &index, &w, &bias);
}

fn softmax(v: &mut [f32]) {
    let max = v.iter().copied().fold(f32::MIN, f32::max);
    let mut sum = 0.0;
    for x in v.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in v.iter_mut() {
        *x /= sum;
    }
}

/// `VTI1`, the labels, the sorted buckets, the scale, the biases, the weights (one byte each).
fn write(out: &Path, labels: &[String], index: &HashMap<u32, usize>, w: &[f32], bias: &[f32]) {
    let classes = labels.len();
    let mut buckets: Vec<(u32, usize)> = index.iter().map(|(b, i)| (*b, *i)).collect();
    buckets.sort_unstable();
    let scale = w.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"VTI1");
    bytes.extend_from_slice(&(classes as u32).to_le_bytes());
    for l in labels {
        bytes.extend_from_slice(&(l.len() as u16).to_le_bytes());
        bytes.extend_from_slice(l.as_bytes());
    }
    bytes.extend_from_slice(&(buckets.len() as u32).to_le_bytes());
    for (b, _) in &buckets {
        bytes.extend_from_slice(&b.to_le_bytes());
    }
    bytes.extend_from_slice(&scale.to_le_bytes());
    for b in bias {
        bytes.extend_from_slice(&b.to_le_bytes());
    }
    for (_, i) in &buckets {
        for c in 0..classes {
            let q = (w[i * classes + c] / scale).round().clamp(-127.0, 127.0) as i8;
            bytes.push(q as u8);
        }
    }
    fs::File::create(out)
        .and_then(|mut f| f.write_all(&bytes))
        .unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
