//! When `edit_file`'s text is not in the file: the lines of the file most like it, so the model
//! (and the user reviewing an edit block) sees what is there instead (issue 40).

/// Below this share of likeness no match is shown: it would mislead more than help.
const LEAST_LIKENESS: f64 = 0.5;
/// Files and texts longer than this are not searched (the search is lines × lines).
const MOST_LINES: usize = 20_000;
const MOST_SOUGHT_LINES: usize = 200;

/// "The nearest match is at lines a–b:" with those lines, or `None` when nothing is alike.
pub fn nearest_match(text: &str, sought: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let wanted: Vec<&str> = sought.lines().collect();
    let n = wanted.len();
    if n == 0 || n > lines.len() || lines.len() > MOST_LINES || n > MOST_SOUGHT_LINES {
        return None;
    }
    let (start, likeness) = (0..=lines.len() - n)
        .map(|start| {
            let total: f64 = (0..n)
                .map(|j| line_likeness(lines[start + j], wanted[j]))
                .sum();
            (start, total / n as f64)
        })
        .fold(
            (0, 0.0),
            |best, next| if next.1 > best.1 { next } else { best },
        );
    if likeness < LEAST_LIKENESS {
        return None;
    }
    let shown = lines[start..start + n].join("\n");
    Some(format!(
        "the nearest match is at lines {}–{} ({}% alike):\n{shown}",
        start + 1,
        start + n,
        (likeness * 100.0).round()
    ))
}

/// 1 for the same line, 0.9 when only spacing differs, else the share of the longer line
/// that a common start and end cover.
fn line_likeness(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if squeeze(a) == squeeze(b) {
        return 0.9;
    }
    let (a, b) = (a.trim().as_bytes(), b.trim().as_bytes());
    let longer = a.len().max(b.len());
    if longer == 0 {
        return 1.0;
    }
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    0.8 * (prefix + suffix) as f64 / longer as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_lines_most_like_the_text() {
        let file = "a = 1\ndef greet():\n    return 'Hello'\n\nb = 2\n";
        let found = nearest_match(file, "def greet():\n    return \"Hello\"\n");
        let found = found.unwrap_or_default();
        assert!(
            found.starts_with("the nearest match is at lines 2–3"),
            "{found}"
        );
        assert!(found.contains("return 'Hello'"), "{found}");
        assert_eq!(nearest_match(file, "completely\nunrelated text here"), None);
    }
}
