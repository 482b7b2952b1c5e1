//! `palaver changes`: what `palaver serve` recorded of the agent's changes in a workspace (issue
//! 39) — `list` them, or `prune` the old ones and the earlier contents nothing names any more.
//! Prune while that workspace's `palaver serve` is stopped: a running one keeps its last scan in
//! memory and would name contents the prune removed.

use crate::proxy::checkpoints::{Change, Checkpoints};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ChangesArgs {
    /// The workspace (default: the current directory).
    #[arg(long)]
    workspace: Option<PathBuf>,
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Each recorded change, oldest first, then the store's size.
    List {
        /// Only this chat's changes.
        #[arg(long)]
        chat: Option<String>,
        /// One JSON object per line instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Forgets changes older than `--older-than-days` (and/or of `--chat`), then every kept
    /// content no remaining change names.
    Prune {
        #[arg(long)]
        older_than_days: Option<u64>,
        #[arg(long)]
        chat: Option<String>,
    },
}

pub fn run(args: ChangesArgs) -> ExitCode {
    let workspace = args
        .workspace
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let Some(folder) = Checkpoints::folder_for(&workspace) else {
        eprintln!(
            "palaver changes: no data folder for {} (is HOME set, and does the workspace exist?)",
            workspace.display()
        );
        return ExitCode::from(2);
    };
    let store = Checkpoints::new(folder.clone());
    match args.action {
        Action::List { chat, json } => {
            let changes: Vec<Change> = store
                .list()
                .into_iter()
                .filter(|c| chat.as_ref().is_none_or(|id| &c.chat_id == id))
                .collect();
            for change in &changes {
                match json {
                    true => println!("{}", serde_json::to_string(change).unwrap_or_default()),
                    false => println!("{}", line(change)),
                }
            }
            if !json {
                println!(
                    "{} change(s) recorded in {}; kept contents: {} bytes",
                    changes.len(),
                    folder.display(),
                    store.size()
                );
            }
            ExitCode::SUCCESS
        }
        Action::Prune {
            older_than_days,
            chat,
        } => {
            if older_than_days.is_none() && chat.is_none() {
                eprintln!("palaver changes prune: say what to forget: --older-than-days N and/or --chat ID");
                return ExitCode::from(2);
            }
            let cutoff = older_than_days.map(|days| now_ms().saturating_sub(days * 86_400_000));
            let drop = |c: &Change| {
                let old = cutoff.is_none_or(|cut| c.at_ms.unwrap_or(0) < cut);
                let chosen = chat.as_ref().is_none_or(|id| &c.chat_id == id);
                old && chosen
            };
            match store.prune(drop) {
                Ok(pruned) => {
                    println!(
                        "forgot {} change(s) and {} kept content(s), {} bytes freed",
                        pruned.changes, pruned.objects, pruned.bytes
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!(
                        "palaver changes prune: {} could not be rewritten: {e}",
                        folder.display()
                    );
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `#12  2026-11-26 13:05  chat c1  call call_3  notes.txt  +3 −1`.
fn line(change: &Change) -> String {
    let what = match (&change.before, &change.after, change.added, change.removed) {
        (None, _, _, _) => "created".to_string(),
        (_, None, _, _) => "deleted".to_string(),
        (_, _, Some(added), Some(removed)) => format!("+{added} −{removed}"),
        _ => "binary".to_string(),
    };
    let when = change.at_ms.map_or("(no time)".to_string(), utc);
    let restore = if change.restore { "  (a restore)" } else { "" };
    format!(
        "#{}  {when}  chat {}  call {}  {}  {what}{restore}",
        change.id, change.chat_id, change.call_id, change.path
    )
}

/// `2026-11-26 13:05 UTC` (days to a civil date as in Howard Hinnant's `civil_from_days`).
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
