//! What the intent classifier reads in a message: words, word pairs and the letters' n-grams of a
//! folded text (lowercase, no accents, numbers by their shape), hashed. Shared, as source, by the
//! build script that trains the classifier (`build/intents.rs`) and by the router that runs it, so both
//! read a message the same way. Plain `std`: the build script has no other dependency.

/// Hash buckets a feature falls in (only the ones training saw are kept).
pub(crate) const BUCKETS: u32 = 1 << 22;

/// The text as the classifier reads it: lowercase, accents folded, numbers replaced by their shape
/// (`#cartao` for eight digits or more, `#n1`…`#n3` by length — the money fence reads the digits
/// themselves), emojis as `#emoji`, a question mark kept as a word, other marks as spaces.
pub(crate) fn fold(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut digits = 0usize;
    let flush = |word: &mut String, digits: &mut usize, words: &mut Vec<String>| {
        if *digits > 0 {
            // "1234 5678 90": groups of a card typed with spaces join into one card.
            words.push(number_shape(*digits).to_owned());
            *digits = 0;
        }
        if !word.is_empty() {
            words.push(std::mem::take(word));
        }
    };
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_digit() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            digits += 1;
            continue;
        }
        // A separator inside a number ("1234.5678", "12,50") keeps the number whole.
        if digits > 0 && matches!(c, '.' | ',' | '-' | '_' | '/' | ' ') {
            continue;
        }
        if digits > 0 {
            flush(&mut word, &mut digits, &mut words);
        }
        match fold_letter(c) {
            Some(l) => word.push(l),
            None => {
                flush(&mut word, &mut digits, &mut words);
                if c == '?' {
                    words.push("?".to_owned());
                } else if (c as u32) >= 0x2600 {
                    words.push("#emoji".to_owned());
                }
            }
        }
    }
    flush(&mut word, &mut digits, &mut words);
    words
}

fn number_shape(digits: usize) -> &'static str {
    match digits {
        0..=1 => "#n1",
        2 => "#n2",
        3..=7 => "#n3",
        _ => "#cartao",
    }
}

fn fold_letter(c: char) -> Option<char> {
    Some(match c {
        'a'..='z' => c,
        'á' | 'à' | 'â' | 'ã' | 'ä' => 'a',
        'é' | 'ê' | 'è' | 'ë' => 'e',
        'í' | 'ì' | 'î' | 'ï' => 'i',
        'ó' | 'ò' | 'ô' | 'õ' | 'ö' => 'o',
        'ú' | 'ù' | 'û' | 'ü' => 'u',
        'ç' => 'c',
        'ñ' => 'n',
        _ => return None,
    })
}

/// The features of `text`: hashed buckets, sorted, each once.
pub(crate) fn features(text: &str) -> Vec<u32> {
    let words = fold(text);
    let mut out = Vec::with_capacity(words.len() * 8);
    for (i, w) in words.iter().enumerate() {
        out.push(hash(b'w', w.as_bytes()));
        if let Some(next) = words.get(i + 1) {
            out.push(hash2(w.as_bytes(), next.as_bytes()));
        }
        // Letters' n-grams carry a word past its typos ("recaga", "sado") and its endings.
        if !w.starts_with('#') && w.len() >= 3 {
            let bounded = format!("<{w}>");
            let b = bounded.as_bytes();
            for n in 3..=4 {
                for gram in b.windows(n) {
                    out.push(hash(b'g', gram));
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// FNV-1a, 64 bits, folded into [`BUCKETS`]: stable across builds and machines.
fn fnv(seed: u8, parts: &[&[u8]]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in std::iter::once(&seed).chain(parts.iter().flat_map(|p| p.iter())) {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(BUCKETS)) as u32
}

fn hash(kind: u8, bytes: &[u8]) -> u32 {
    fnv(kind, &[bytes])
}

fn hash2(a: &[u8], b: &[u8]) -> u32 {
    fnv(b'b', &[a, b" ", b])
}
