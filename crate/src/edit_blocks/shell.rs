//! Shell commands an answer suggests: the lines of a closed ```sh / ```bash / ```shell / ```zsh
//! fence (a `$ ` prompt dropped, comments skipped, `\` continuations joined), and in a
//! ```console fence only the lines after a `$ ` prompt (the others are output).

/// Commands kept from one answer: more is a script, not a suggestion.
pub const MAX_COMMANDS: usize = 20;

pub(super) fn is_shell_language(language: &str) -> bool {
    matches!(
        language.to_ascii_lowercase().as_str(),
        "sh" | "bash" | "shell" | "zsh" | "console" | "shell-session" | "terminal"
    )
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct ShellFence {
    /// Only `$ ` lines are commands (a session transcript with output).
    prompted_only: bool,
    commands: Vec<String>,
    /// A command continued with `\` on its next line.
    open: Option<String>,
}

impl ShellFence {
    pub(super) fn new(language: &str) -> Self {
        ShellFence {
            prompted_only: matches!(
                language.to_ascii_lowercase().as_str(),
                "console" | "shell-session" | "terminal"
            ),
            commands: Vec::new(),
            open: None,
        }
    }

    pub(super) fn read(&mut self, line: &str) {
        if let Some(mut open) = self.open.take() {
            return self.add(&mut open, line.trim());
        }
        let trimmed = line.trim();
        let command = match trimmed.strip_prefix("$ ") {
            Some(command) => command.trim(),
            None if self.prompted_only => return,
            None => trimmed,
        };
        if command.is_empty() || command.starts_with('#') {
            return;
        }
        self.add(&mut String::new(), command);
    }

    fn add(&mut self, so_far: &mut String, part: &str) {
        match part.strip_suffix('\\') {
            Some(head) => {
                so_far.push_str(head.trim_end());
                so_far.push(' ');
                self.open = Some(std::mem::take(so_far));
            }
            None => {
                so_far.push_str(part);
                if self.commands.len() < MAX_COMMANDS {
                    self.commands.push(so_far.trim().to_string());
                }
            }
        }
    }

    pub(super) fn finish(self) -> Vec<String> {
        self.commands
    }
}
