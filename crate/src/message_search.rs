//! Search inside messages (issue 38): whether a message's text holds every word of a query
//! (case does not matter), and the line a result shows — the first line holding the first word,
//! cut around it. Pure: the browser host feeds it the stored messages of every chat.

/// The most characters of a result's line.
pub const LINE_CHARS: usize = 160;

/// A query's words, lowercased; empty when the query has no word.
pub fn terms(query: &str) -> Vec<String> {
    query
        .split_whitespace()
        .map(str::to_lowercase)
        .filter(|t| !t.is_empty())
        .collect()
}

/// The line to show when `text` holds every term, else `None`.
pub fn matching_line(text: &str, terms: &[String]) -> Option<String> {
    let first = terms.first()?;
    let lower = text.to_lowercase();
    if !terms.iter().all(|t| lower.contains(t.as_str())) {
        return None;
    }
    let line = text
        .lines()
        .find(|l| l.to_lowercase().contains(first.as_str()))
        .unwrap_or(text);
    Some(cut_around(line.trim(), first))
}

/// At most `LINE_CHARS` characters of `line`, the first match of `term` in them (an ellipsis
/// where it was cut).
fn cut_around(line: &str, term: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= LINE_CHARS {
        return line.to_string();
    }
    let lower: Vec<char> = line.to_lowercase().chars().collect();
    let needle: Vec<char> = term.chars().collect();
    // Lowercasing can change a string's length (rarely): then the line is cut from its start.
    let at = if lower.len() == chars.len() {
        lower
            .windows(needle.len().max(1))
            .position(|w| w == needle.as_slice())
            .unwrap_or(0)
    } else {
        0
    };
    let start = at.saturating_sub(LINE_CHARS / 3);
    let end = (start + LINE_CHARS).min(chars.len());
    let start = end.saturating_sub(LINE_CHARS);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_must_match_in_any_case_and_the_line_of_the_first_is_shown() {
        let text = "First line\nThe Garden spider has eight legs\nlast";
        assert_eq!(
            matching_line(text, &terms("spider GARDEN")),
            Some("The Garden spider has eight legs".into())
        );
        assert_eq!(matching_line(text, &terms("spider wolf")), None);
        assert_eq!(matching_line(text, &terms("   ")), None);
    }

    #[test]
    fn a_long_line_is_cut_around_the_match() {
        let text = format!("{}needle{}", "a".repeat(500), "b".repeat(500));
        let line = matching_line(&text, &terms("NEEDLE")).unwrap_or_default();
        assert!(line.contains("needle") && line.starts_with('…') && line.ends_with('…'));
        assert!(line.chars().count() <= LINE_CHARS + 2);
    }
}
