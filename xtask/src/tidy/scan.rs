//! Reading Rust sources for the tidy rules without a parser: comments and literals blanked
//! out, test code told apart, functions found by their braces, literal offsets spotted.

pub(super) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `word` stands in `code` as a whole word (not inside a longer identifier).
pub(super) fn has_word(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// `text` with every comment and every string and character literal blanked out (each
/// character a space, line breaks kept), so that what remains is code, line for line.
pub(super) fn blank_non_code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = chars.clone();
    let blank = |out: &mut Vec<char>, range: std::ops::Range<usize>| {
        for c in &mut out[range] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let mut at = 0;
    while at < chars.len() {
        let rest = &chars[at..];
        let previous_is_ident = at > 0 && is_ident(chars[at - 1]);
        let end = match rest {
            ['/', '/', ..] => at + rest.iter().position(|&c| c == '\n').unwrap_or(rest.len()),
            ['/', '*', ..] => at + block_comment_len(rest),
            ['r', '"' | '#', ..] | ['b', 'r', '"' | '#', ..] if !previous_is_ident => {
                at + raw_string_len(rest).unwrap_or(1)
            }
            ['b', '"', ..] if !previous_is_ident => at + 1 + quoted_len(&rest[1..], '"'),
            ['"', ..] => at + quoted_len(rest, '"'),
            ['b', '\'', ..] if !previous_is_ident => at + 1 + quoted_len(&rest[1..], '\''),
            // A character literal, not a lifetime: an escape, or one character and a quote.
            ['\'', '\\', ..] | ['\'', _, '\'', ..] => at + quoted_len(rest, '\''),
            _ => at + 1,
        };
        if end > at + 1 || matches!(rest, ['/', '/', ..] | ['"', ..]) {
            blank(&mut out, at..end.min(chars.len()));
        }
        at = end.max(at + 1);
    }
    out.into_iter().collect()
}

/// The length of the block comment at the start of `rest` (nested ones included).
fn block_comment_len(rest: &[char]) -> usize {
    let mut depth = 0;
    let mut at = 0;
    while at < rest.len() {
        match &rest[at..] {
            ['/', '*', ..] => {
                depth += 1;
                at += 2;
            }
            ['*', '/', ..] => {
                depth -= 1;
                at += 2;
                if depth == 0 {
                    return at;
                }
            }
            _ => at += 1,
        }
    }
    rest.len()
}

/// The length of the literal quoted by `quote` at the start of `rest`, escapes skipped.
fn quoted_len(rest: &[char], quote: char) -> usize {
    let mut at = 1;
    while at < rest.len() {
        match rest[at] {
            '\\' => at += 2,
            c if c == quote => return at + 1,
            _ => at += 1,
        }
    }
    rest.len()
}

/// The length of the raw string (`r"..."`, `r#"..."#`, `br...`) at the start of `rest`, or
/// `None` when `rest` starts with no raw string (`r#ident`).
fn raw_string_len(rest: &[char]) -> Option<usize> {
    let start = usize::from(rest[0] == 'b') + 1;
    let hashes = rest[start..].iter().take_while(|&&c| c == '#').count();
    if rest.get(start + hashes) != Some(&'"') {
        return None;
    }
    let body = start + hashes + 1;
    (body..rest.len())
        .find(|&at| {
            rest[at] == '"'
                && rest[at + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&c| c == '#')
                    .count()
                    == hashes
        })
        .map(|at| at + 1 + hashes)
        .or(Some(rest.len()))
}

/// Which lines of `code` (a file blanked by [`blank_non_code`]) are tests: a
/// `#[cfg(test)]` (or `#[cfg(all(test, ...))]`) module, from its attribute to its closing brace; every line when `path` is
/// a test file (`tests/`, `tests.rs`).
pub(super) fn test_lines(path: &str, code: &[&str]) -> Vec<bool> {
    if path.contains("/tests/") || path.starts_with("tests/") || path.ends_with("/tests.rs") {
        return vec![true; code.len()];
    }
    let mut tests = vec![false; code.len()];
    let mut index = 0;
    while index < code.len() {
        let attribute = code[index].trim();
        let module = (attribute == "#[cfg(test)]" || attribute.starts_with("#[cfg(all(test,"))
            && code.get(index + 1).is_some_and(|next| {
                let next = next.trim_start();
                next.starts_with("mod ") || next.starts_with("pub mod ")
            });
        if !module {
            index += 1;
            continue;
        }
        let end = if code[index + 1].trim_end().ends_with(';') {
            index + 1
        } else {
            block_end(code, index + 1).unwrap_or(code.len() - 1)
        };
        tests[index..=end].fill(true);
        index = end + 1;
    }
    tests
}

/// The line of the brace that closes the first block opened at or after line `from`.
fn block_end(code: &[&str], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut opened = false;
    for (index, line) in code.iter().enumerate().skip(from) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if opened && depth == 0 {
                return Some(index);
            }
        }
    }
    None
}

/// One function found in a file: its name, and the lines of its `fn` and of its closing
/// brace.
pub(super) struct Function {
    pub(super) name: String,
    pub(super) first: usize,
    pub(super) last: usize,
}

/// The functions with a body in `code` (a file blanked by [`blank_non_code`]), nested ones
/// too.
pub(super) fn functions(code: &[&str]) -> Vec<Function> {
    let mut found = Vec::new();
    for (index, line) in code.iter().enumerate() {
        for (at, _) in line.match_indices("fn ") {
            if line[..at].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let name: String = line[at + 3..]
                .trim_start()
                .chars()
                .take_while(|&c| is_ident(c))
                .collect();
            if name.is_empty() {
                continue;
            }
            if let Some(body) = body_start(code, index, at) {
                let last = block_end(code, body).unwrap_or(code.len() - 1);
                found.push(Function {
                    name,
                    first: index,
                    last,
                });
            }
        }
    }
    found
}

/// The line where the body of the `fn` at `line`, column `at`, opens: the first `{` outside
/// parentheses and brackets; `None` for a declaration without a body (a `;` first).
fn body_start(code: &[&str], line: usize, at: usize) -> Option<usize> {
    let mut nesting = 0usize;
    for (index, text) in code.iter().enumerate().skip(line) {
        let text = if index == line { &text[at..] } else { text };
        for c in text.chars() {
            match c {
                '(' | '[' => nesting += 1,
                ')' | ']' => nesting = nesting.saturating_sub(1),
                '{' if nesting == 0 => return Some(index),
                ';' if nesting == 0 => return None,
                _ => {}
            }
        }
    }
    None
}

/// Whether `line` counts toward a function's length: it holds code, not only a comment.
pub(super) fn is_code_line(line: &str) -> bool {
    let line = line.trim();
    !line.is_empty() && !line.starts_with("//")
}

/// A literal offset in `code` that looks like a slice of a page image: `[..8]`, `[12..16]`,
/// `[16..]` (every present bound an integer literal, one a non-zero multiple of 4) after an
/// expression, or an assignment to `x[8]`. Returns the text found.
pub(super) fn literal_offset(code: &str) -> Option<&str> {
    for (open, _) in code.match_indices('[') {
        let after_expression = code[..open]
            .chars()
            .next_back()
            .is_some_and(|c| is_ident(c) || c == ')' || c == ']');
        let Some(close) = code[open..].find(']').map(|at| open + at) else {
            continue;
        };
        if !after_expression {
            continue;
        }
        let inside = &code[open + 1..close];
        let bounds: Vec<&str> = match inside.split_once("..") {
            Some((low, high)) => vec![low.trim(), high.trim_start_matches('=').trim()],
            None => {
                // A single index counts only where it is written to.
                let rest = code[close + 1..].trim_start();
                let assigned = ["=", "+=", "-=", "|=", "&=", "^="]
                    .iter()
                    .any(|op| rest.starts_with(op))
                    && !rest.starts_with("==");
                if !assigned {
                    continue;
                }
                vec![inside.trim()]
            }
        };
        let literal =
            |b: &&str| !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit() || c == b'_');
        let present: Vec<&&str> = bounds.iter().filter(|b| !b.is_empty()).collect();
        if present.is_empty() || !present.iter().all(|b| literal(b)) {
            continue;
        }
        let offset = |b: &&&str| {
            b.replace('_', "")
                .parse::<u64>()
                .is_ok_and(|n| n > 0 && n % 4 == 0)
        };
        if present.iter().any(offset) {
            return Some(&code[open..=close]);
        }
    }
    None
}
