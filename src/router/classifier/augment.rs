//! The corpus's generator: from one message people wrote, the ways others type it — a typo (a letter
//! dropped, doubled, swapped with the next, or the key beside it), chat abbreviations ("vc", "qto",
//! "pfv"), a greeting before it or a run-on after it, as a voice note transcribes. Deterministic (a
//! seed per message), so a build trains on the same corpus every time. Shared, as source, by the build
//! script and the tests.

/// A small, seeded generator (SplitMix64): the same seed, the same variants.
pub(crate) struct Seeded(u64);

impl Seeded {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// How people shorten words in chat.
const ABBREVIATIONS: &[(&str, &str)] = &[
    ("você", "vc"),
    ("voce", "vc"),
    ("vocês", "vcs"),
    ("quanto", "qto"),
    ("quero", "qro"),
    ("para", "pra"),
    ("por favor", "pfv"),
    ("porque", "pq"),
    ("também", "tb"),
    ("beleza", "blz"),
    ("obrigado", "obg"),
    ("não", "n"),
    ("cartão", "cartao"),
    ("está", "tá"),
    ("estou", "to"),
    ("mensagem", "msg"),
    ("hoje", "hj"),
    ("aqui", "aki"),
    ("que", "q"),
    ("tudo", "td"),
];

const OPENINGS: &[&str] = &[
    "oi, ",
    "olá ",
    "bom dia, ",
    "boa noite ",
    "opa ",
    "ei ",
    "moço, ",
    "por favor ",
];
const CLOSINGS: &[&str] = &[
    " por favor",
    " pfv",
    " obrigado",
    " 🙏",
    "!!",
    " ??",
    " rs",
    " urgente",
    " aí",
];

/// The keys beside each letter on a phone's QWERTY keyboard.
fn neighbour(c: char) -> Option<char> {
    const ROWS: [&str; 3] = ["qwertyuiop", "asdfghjkl", "zxcvbnm"];
    for row in ROWS {
        if let Some(i) = row.find(c) {
            let b = row.as_bytes();
            let j = if i + 1 < b.len() { i + 1 } else { i.checked_sub(1)? };
            return Some(char::from(b[j]));
        }
    }
    None
}

/// One typo in `text`, at a letter chosen by `rng` (a word of four letters or more).
pub(crate) fn typo(text: &str, rng: &mut Seeded) -> String {
    let chars: Vec<char> = text.chars().collect();
    let spots: Vec<usize> = (1..chars.len().saturating_sub(1))
        .filter(|&i| {
            chars[i].is_ascii_lowercase() && chars[i - 1].is_alphabetic() && chars[i + 1].is_alphabetic()
        })
        .collect();
    if spots.is_empty() {
        return text.to_owned();
    }
    let i = spots[rng.below(spots.len())];
    let mut out = chars.clone();
    match rng.below(4) {
        0 => {
            out.remove(i);
        }
        1 => out.insert(i, chars[i]),
        2 => out.swap(i, i + 1),
        _ => {
            if let Some(n) = neighbour(chars[i]) {
                out[i] = n;
            }
        }
    }
    out.into_iter().collect()
}

/// The first abbreviation that applies, whole words only.
pub(crate) fn abbreviate(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    for (long, short) in ABBREVIATIONS {
        let padded = format!(" {lower} ");
        let needle = format!(" {long} ");
        if padded.contains(&needle) {
            return Some(
                padded
                    .replacen(&needle, &format!(" {short} "), 1)
                    .trim()
                    .to_owned(),
            );
        }
    }
    None
}

/// The variants of one message: a typo, an abbreviation or no accents, and a greeting or a closing
/// around it.
pub(crate) fn variants(text: &str, seed: u64) -> Vec<String> {
    let mut rng = Seeded::new(seed);
    let mut out = vec![typo(text, &mut rng)];
    let shortened = abbreviate(text).unwrap_or_else(|| typo(&text.to_lowercase(), &mut rng));
    out.push(shortened);
    let around = match rng.below(2) {
        0 => format!("{}{text}", OPENINGS[rng.below(OPENINGS.len())]),
        _ => format!("{text}{}", CLOSINGS[rng.below(CLOSINGS.len())]),
    };
    out.push(around);
    out.retain(|v| v != text);
    out.dedup();
    out
}
