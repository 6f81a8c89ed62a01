//! `calcular`: arithmetic done by code, never by the model ("22 dias úteis a 4,40 ida e volta").
//! Decimal numbers as people write them (`4,40`, `1.234,56`), `+ - * / x × ÷` and parentheses, over
//! `rust_decimal`: no float rounding, an overflow or a division by zero is an error, never a number.

use async_trait::async_trait;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Deserialize;

use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToAgent};

pub struct Calcular;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// A expressão com os números que o usuário deu (vírgula ou ponto decimal), + - * / e parênteses.
    pub expressao: String,
}

/// The longest expression read: a conversation's arithmetic, not a program.
const MAX_LEN: usize = 200;

#[async_trait]
impl Action for Calcular {
    type Args = Args;

    const NAME: &'static str = "calcular";
    const DESCRIPTION: &'static str = "Calcula uma expressão aritmética exata (somas, passagens por dia, dias úteis). Use sempre esta \
         ferramenta para qualquer conta; nunca calcule de cabeça.";

    fn retry_safe(&self) -> bool {
        true
    }

    async fn call(&self, _ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let value = evaluate(&args.expressao)
            .map_err(|e| ActionError::InvalidArguments(format!("expressao: {e}")))?;
        Ok(ResponseToAgent::new(format!("{} = {}", args.expressao.trim(), decimal_pt(value))).into())
    }
}

/// `value` as written in Brazil, at most two decimals: `193,6` → `193,60`, `22` → `22`.
pub fn decimal_pt(value: Decimal) -> String {
    let rounded = crate::vt::round_half_up(value);
    let text = if rounded.fract().is_zero() {
        rounded.trunc().to_string()
    } else {
        format!("{rounded:.2}")
    };
    text.replace('.', ",")
}

/// The value of `expr`, or what is wrong with it (in pt-BR, never quoting it).
pub fn evaluate(expr: &str) -> Result<Decimal, String> {
    if expr.chars().count() > MAX_LEN {
        return Err(format!("a expressão passa de {MAX_LEN} caracteres"));
    }
    let tokens = tokens(expr)?;
    let mut parser = Parser {
        tokens,
        at: 0,
        depth: 0,
    };
    let value = parser.sum()?;
    if parser.at != parser.tokens.len() {
        return Err("há algo depois do fim da expressão".into());
    }
    Ok(value)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(Decimal),
    Op(char),
    Open,
    Close,
}

fn tokens(expr: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | 'R' | '$' => i += 1,
            '0'..='9' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == ',' || chars[i] == '.') {
                    i += 1;
                }
                out.push(Token::Num(number(&chars[start..i].iter().collect::<String>())?));
            }
            '+' | '-' => {
                out.push(Token::Op(c));
                i += 1;
            }
            '*' | 'x' | 'X' | '×' | '·' => {
                out.push(Token::Op('*'));
                i += 1;
            }
            '/' | '÷' | ':' => {
                out.push(Token::Op('/'));
                i += 1;
            }
            '(' => {
                out.push(Token::Open);
                i += 1;
            }
            ')' => {
                out.push(Token::Close);
                i += 1;
            }
            _ => return Err("só números, + - * / e parênteses".into()),
        }
    }
    Ok(out)
}

/// `4,40`, `4.40`, `1.234,56`, `1,234.56`: the last separator is the decimal one when both appear.
fn number(text: &str) -> Result<Decimal, String> {
    let text = text.trim_end_matches(['.', ',']);
    let last = text.rfind([',', '.']);
    let both = text.contains(',') && text.contains('.');
    let plain: String = match last {
        Some(pos) if both => {
            let (int, frac) = text.split_at(pos);
            format!("{}.{}", int.replace([',', '.'], ""), &frac[1..])
        }
        _ => text.replace(',', "."),
    };
    plain
        .parse::<Decimal>()
        .map_err(|_| "um número não pôde ser lido".to_owned())
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn sum(&mut self) -> Result<Decimal, String> {
        let mut value = self.product()?;
        while let Some(Token::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.at += 1;
            let rhs = self.product()?;
            value = if op == '+' {
                value.checked_add(rhs)
            } else {
                value.checked_sub(rhs)
            }
            .ok_or("o resultado é grande demais")?;
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<Decimal, String> {
        let mut value = self.factor()?;
        while let Some(Token::Op(op @ ('*' | '/'))) = self.peek().cloned() {
            self.at += 1;
            let rhs = self.factor()?;
            value = if op == '*' {
                value.checked_mul(rhs).ok_or("o resultado é grande demais")?
            } else if rhs.is_zero() {
                return Err("divisão por zero".into());
            } else {
                value.checked_div(rhs).ok_or("o resultado é grande demais")?
            };
        }
        Ok(value)
    }

    fn factor(&mut self) -> Result<Decimal, String> {
        match self.peek().cloned() {
            Some(Token::Num(n)) => {
                self.at += 1;
                Ok(n)
            }
            Some(Token::Op('-')) => {
                self.at += 1;
                Ok(-self.factor()?)
            }
            Some(Token::Open) => {
                self.depth += 1;
                if self.depth > 20 {
                    return Err("parênteses demais".into());
                }
                self.at += 1;
                let value = self.sum()?;
                if self.peek() != Some(&Token::Close) {
                    return Err("falta fechar um parêntese".into());
                }
                self.at += 1;
                self.depth -= 1;
                Ok(value)
            }
            _ => Err("a expressão está incompleta".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        s.parse().expect("decimal")
    }

    #[test]
    fn fares_per_day_are_exact() {
        assert_eq!(evaluate("22 * 2 * 4,40"), Ok(dec("193.60")));
        assert_eq!(evaluate("22 x 8,80"), Ok(dec("193.60")));
        assert_eq!(evaluate("(4,40 + 4,40) × 22"), Ok(dec("193.60")));
        assert_eq!(evaluate("1.234,56 + 0,44"), Ok(dec("1235.00")));
        assert_eq!(evaluate("0.1 + 0.2"), Ok(dec("0.3")));
        assert_eq!(evaluate("100 / 3").map(decimal_pt), Ok("33,33".into()));
        assert_eq!(decimal_pt(dec("193.6")), "193,60");
        assert_eq!(decimal_pt(dec("22")), "22");
    }

    #[test]
    fn what_is_not_arithmetic_is_refused() {
        assert!(evaluate("1 / 0").is_err());
        assert!(evaluate("2 +").is_err());
        assert!(evaluate("(1 + 2").is_err());
        assert!(evaluate("rm -rf /").is_err());
        assert!(evaluate("79228162514264337593543950335 * 10").is_err());
        assert!(evaluate(&"(".repeat(50)).is_err());
        assert!(evaluate(&"1+".repeat(150)).is_err());
    }
}
