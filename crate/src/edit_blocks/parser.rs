//! The edit-block state machine. Text arrives in chunks; only whole lines are read (the rest
//! waits for its line end), so any chunking of an answer reads the same.

use super::shell::{is_shell_language, ShellFence};
use super::{EditBlock, Proposals};

/// Where the reader is.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Prose or code that is not a block; a fence may be open.
    Text,
    /// Inside a block, before its `=======`.
    Search { path: String, search: String },
    /// Inside a block, after its `=======`.
    Replace {
        path: String,
        search: String,
        replace: String,
    },
}

/// An open fence: its marker (three or more backticks or tildes) and, for a shell language,
/// the commands gathered in it.
#[derive(Debug, Clone, PartialEq)]
struct Fence {
    marker: String,
    shell: Option<ShellFence>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EditBlockParser {
    /// The line read so far (no line end yet).
    line: String,
    state: State,
    fence: Option<Fence>,
    /// The path the last non-empty prose line (or a fence's info) names, for the next block.
    path_line: Option<String>,
    /// The last block's file: a block right after another without a path line edits it too.
    last_path: Option<String>,
    found: Proposals,
}

impl Default for EditBlockParser {
    fn default() -> Self {
        EditBlockParser {
            line: String::new(),
            state: State::Text,
            fence: None,
            path_line: None,
            last_path: None,
            found: Proposals::default(),
        }
    }
}

impl EditBlockParser {
    /// Reads a chunk of the answer.
    pub fn push(&mut self, chunk: &str) {
        let mut rest = chunk;
        while let Some(end) = rest.find('\n') {
            self.line.push_str(&rest[..end]);
            let line = std::mem::take(&mut self.line);
            self.read_line(line.strip_suffix('\r').unwrap_or(&line));
            rest = &rest[end + 1..];
        }
        self.line.push_str(rest);
    }

    /// The answer ended: its last line is read, and a block still open is kept as cut off.
    pub fn finish(mut self) -> Proposals {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.read_line(line.strip_suffix('\r').unwrap_or(&line));
        }
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text => {}
            State::Search { path, search } => self.found.blocks.push(EditBlock {
                path,
                search,
                replace: String::new(),
                complete: false,
            }),
            State::Replace {
                path,
                search,
                replace,
            } => self.found.blocks.push(EditBlock {
                path,
                search,
                replace,
                complete: false,
            }),
        }
        // A shell fence the answer never closed may be cut mid-command: not offered.
        self.found
    }

    fn read_line(&mut self, line: &str) {
        self.state = match std::mem::replace(&mut self.state, State::Text) {
            State::Text => self.read_text(line),
            State::Search { path, mut search } => {
                if is_marker(line, '=', "") {
                    State::Replace {
                        path,
                        search,
                        replace: String::new(),
                    }
                } else {
                    push_line(&mut search, line);
                    State::Search { path, search }
                }
            }
            State::Replace {
                path,
                search,
                mut replace,
            } => {
                if is_marker(line, '>', "REPLACE") {
                    self.last_path = Some(path.clone());
                    self.path_line = None;
                    self.found.blocks.push(EditBlock {
                        path,
                        search,
                        replace,
                        complete: true,
                    });
                    State::Text
                } else {
                    push_line(&mut replace, line);
                    State::Replace {
                        path,
                        search,
                        replace,
                    }
                }
            }
        };
    }

    fn read_text(&mut self, line: &str) -> State {
        if is_marker(line, '<', "SEARCH") {
            let path = self
                .path_line
                .take()
                .or_else(|| self.last_path.clone())
                .unwrap_or_default();
            return State::Search {
                path,
                search: String::new(),
            };
        }
        if let Some((marker, info)) = fence_line(line) {
            self.on_fence(marker, info);
            return State::Text;
        }
        if let Some(Fence {
            shell: Some(shell), ..
        }) = &mut self.fence
        {
            shell.read(line);
        }
        if !line.trim().is_empty() {
            self.path_line = path_in(line);
        }
        State::Text
    }

    fn on_fence(&mut self, marker: &str, info: &str) {
        match self.fence.take() {
            Some(open) if info.is_empty() && marker.starts_with(&open.marker) => {
                if let Some(shell) = open.shell {
                    self.found.shell_commands.extend(shell.finish());
                }
            }
            Some(open) => self.fence = Some(open), // a fence line inside a fence: its text
            None => {
                let mut words = info.split_whitespace();
                let language = words.next().unwrap_or("");
                // "```rust src/lib.rs" or "```src/lib.rs": the fence names the file.
                let named = words.next().and_then(path_in).or_else(|| {
                    (language.contains('/') || language.contains('.'))
                        .then(|| path_in(language))
                        .flatten()
                });
                if named.is_some() {
                    self.path_line = named;
                }
                self.fence = Some(Fence {
                    marker: marker.to_string(),
                    shell: is_shell_language(language).then(|| ShellFence::new(language)),
                });
            }
        }
    }
}

fn push_line(text: &mut String, line: &str) {
    text.push_str(line);
    text.push('\n');
}

/// `<<<<<<< SEARCH`, `=======`, `>>>>>>> REPLACE`: five to nine of the mark, then the word.
fn is_marker(line: &str, mark: char, word: &str) -> bool {
    let line = line.trim();
    let marks = line.chars().take_while(|c| *c == mark).count();
    (5..=9).contains(&marks) && line[marks..].trim() == word
}

/// A fence line: its marker (``` or ~~~, three or more) and its info string.
fn fence_line(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start();
    let mark = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let count = line.chars().take_while(|c| *c == mark).count();
    (count >= 3).then(|| (&line[..count], line[count..].trim()))
}

/// The path a line names, if it looks like one: the whole line (`src/lib.rs`, `**src/lib.rs**`,
/// `# src/lib.rs:`), else a backticked path in prose ("Change `src/lib.rs`:").
fn path_in(line: &str) -> Option<String> {
    let trimmed = line
        .trim()
        .trim_start_matches('#')
        .trim()
        .trim_matches(|c| c == '*' || c == '`' || c == '"' || c == '\'')
        .trim_end_matches(':')
        .trim_matches(|c| c == '*' || c == '`');
    if !trimmed.is_empty() && !trimmed.contains(char::is_whitespace) && looks_like_path(trimmed) {
        return Some(trimmed.to_string());
    }
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(str::trim)
        .filter(|p| !p.contains(char::is_whitespace) && looks_like_path(p))
        .last()
        .map(str::to_string)
}

/// A file name has a dot or a slash, and no characters prose or code would have instead.
fn looks_like_path(word: &str) -> bool {
    (word.contains('.') || word.contains('/'))
        && !word.ends_with('.')
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || "._-/+@~".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_files() {
        assert_eq!(path_in("src/lib.rs").as_deref(), Some("src/lib.rs"));
        assert_eq!(path_in("**src/lib.rs**").as_deref(), Some("src/lib.rs"));
        assert_eq!(path_in("### `app.py`:").as_deref(), Some("app.py"));
        assert_eq!(
            path_in("Change `greet.py` like this:").as_deref(),
            Some("greet.py")
        );
        assert_eq!(path_in("Here is the change."), None);
        assert_eq!(path_in("fn main() {}"), None);
    }

    #[test]
    fn markers() {
        assert!(is_marker("<<<<<<< SEARCH", '<', "SEARCH"));
        assert!(is_marker("  <<<<<<<SEARCH ", '<', "SEARCH"));
        assert!(is_marker("=======", '=', ""));
        assert!(!is_marker("==", '=', ""));
        assert!(!is_marker("<<<<<<< HEAD", '<', "SEARCH"));
    }
}
