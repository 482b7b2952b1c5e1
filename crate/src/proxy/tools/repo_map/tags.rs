//! Definitions and references of one file, read with tree-sitter's tags queries (the grammars'
//! own `tags.scm`, as aider's repository map reads them): Rust, Python, JavaScript, TypeScript,
//! Go, Java, C and C++; Markdown headings are read line by line. A file is read again only when
//! its size or modification time changed (`TagCache`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;
use tree_sitter_tags::{TagsConfiguration, TagsContext};

/// One name a file defines or uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub name: String,
    /// The tags query's kind: `function`, `method`, `class`, `interface`, `module`, `macro`,
    /// `type`, `constant`, `call`, `implementation`…; `heading` for Markdown.
    pub kind: String,
    /// 1-based.
    pub line: usize,
    pub is_definition: bool,
    /// A use written after a `.` (`x.push()`): which type's name it is, the map cannot know.
    pub dotted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
    Java,
    C,
    Cpp,
    Markdown,
}

impl Lang {
    pub fn of(path: &str) -> Option<Lang> {
        let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
        Some(match ext.as_str() {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            "java" => Lang::Java,
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Lang::Cpp,
            "md" | "markdown" => Lang::Markdown,
            _ => return None,
        })
    }

    /// The language's tags configuration, built the first time a file of it is read (compiling
    /// every grammar's queries up front cost a cold map ~70 ms of nine languages mostly unused);
    /// `None` when its query does not compile.
    fn config(self) -> Option<&'static TagsConfiguration> {
        static CONFIGS: [OnceLock<Option<TagsConfiguration>>; 10] = [const { OnceLock::new() }; 10];
        CONFIGS[self as usize]
            .get_or_init(|| build_config(self))
            .as_ref()
    }
}

fn build_config(wanted: Lang) -> Option<TagsConfiguration> {
    // TypeScript's own tags query covers only what it adds to JavaScript's: both are used.
    let typescript_tags = format!(
        "{}\n{}",
        tree_sitter_javascript::TAGS_QUERY,
        tree_sitter_typescript::TAGS_QUERY
    );
    let grammars: Vec<(Lang, tree_sitter::Language, String, &str)> = vec![
        (
            Lang::Rust,
            tree_sitter_rust::LANGUAGE.into(),
            tree_sitter_rust::TAGS_QUERY.into(),
            "",
        ),
        (
            Lang::Python,
            tree_sitter_python::LANGUAGE.into(),
            tree_sitter_python::TAGS_QUERY.into(),
            "",
        ),
        (
            Lang::JavaScript,
            tree_sitter_javascript::LANGUAGE.into(),
            tree_sitter_javascript::TAGS_QUERY.into(),
            tree_sitter_javascript::LOCALS_QUERY,
        ),
        (
            Lang::TypeScript,
            tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            typescript_tags.clone(),
            "",
        ),
        (
            Lang::Tsx,
            tree_sitter_typescript::LANGUAGE_TSX.into(),
            typescript_tags,
            "",
        ),
        (
            Lang::Go,
            tree_sitter_go::LANGUAGE.into(),
            tree_sitter_go::TAGS_QUERY.into(),
            "",
        ),
        (
            Lang::Java,
            tree_sitter_java::LANGUAGE.into(),
            tree_sitter_java::TAGS_QUERY.into(),
            "",
        ),
        (
            Lang::C,
            tree_sitter_c::LANGUAGE.into(),
            tree_sitter_c::TAGS_QUERY.into(),
            "",
        ),
        (
            Lang::Cpp,
            tree_sitter_cpp::LANGUAGE.into(),
            tree_sitter_cpp::TAGS_QUERY.into(),
            "",
        ),
    ];
    let (lang, language, tags, locals) = grammars.into_iter().find(|g| g.0 == wanted)?;
    TagsConfiguration::new(language.clone(), &tags, locals)
        .or_else(|_| {
            // A combined query a grammar cannot compile: the grammar's own query alone.
            let own = match lang {
                Lang::TypeScript | Lang::Tsx => tree_sitter_typescript::TAGS_QUERY,
                _ => "",
            };
            TagsConfiguration::new(language, own, "")
        })
        .ok()
}

/// The tags of `source`; `None` when the file cannot be read as this language's text.
pub fn tags_of(lang: Lang, source: &[u8]) -> Option<Vec<Tag>> {
    if lang == Lang::Markdown {
        return Some(markdown_headings(&String::from_utf8_lossy(source)));
    }
    let config = lang.config()?;
    // One parser per thread, kept: making one per file costs as much as a small file's parse.
    thread_local! {
        static CONTEXT: std::cell::RefCell<TagsContext> = std::cell::RefCell::new(TagsContext::new());
    }
    CONTEXT.with(|context| read_tags(&mut context.borrow_mut(), config, source))
}

fn read_tags(
    context: &mut TagsContext,
    config: &TagsConfiguration,
    source: &[u8],
) -> Option<Vec<Tag>> {
    let (tags, _) = context.generate_tags(config, source, None).ok()?;
    let mut out = Vec::new();
    for tag in tags {
        let tag = tag.ok()?;
        let name = String::from_utf8_lossy(source.get(tag.name_range.clone())?).into_owned();
        if name.is_empty() || name.len() > 200 {
            continue;
        }
        let dotted =
            tag.name_range.start > 0 && source.get(tag.name_range.start - 1) == Some(&b'.');
        out.push(Tag {
            name,
            kind: config.syntax_type_name(tag.syntax_type_id).to_string(),
            line: tag.span.start.row + 1,
            is_definition: tag.is_definition,
            dotted,
        });
    }
    Some(out)
}

/// `#`-headings outside fenced code, as definitions named by their text.
fn markdown_headings(text: &str) -> Vec<Tag> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if fenced || hashes == 0 || hashes > 6 || !trimmed[hashes..].starts_with(' ') {
            continue;
        }
        let title = trimmed[hashes..].trim().trim_end_matches('#').trim();
        if !title.is_empty() {
            out.push(Tag {
                name: title.chars().take(120).collect(),
                kind: "heading".into(),
                line: index + 1,
                is_definition: true,
                dotted: false,
            });
        }
    }
    out
}

/// Each file's tags as last read, with the size and modification time they were read at.
#[derive(Default)]
pub struct TagCache {
    files: HashMap<String, (u64, SystemTime, Arc<Vec<Tag>>)>,
}

impl TagCache {
    /// The tags of `path` when its size and time are unchanged since they were read.
    pub fn get(&self, path: &str, size: u64, modified: SystemTime) -> Option<Arc<Vec<Tag>>> {
        let (s, m, tags) = self.files.get(path)?;
        (*s == size && *m == modified).then(|| tags.clone())
    }

    pub fn put(&mut self, path: &str, size: u64, modified: SystemTime, tags: Arc<Vec<Tag>>) {
        self.files.insert(path.to_string(), (size, modified, tags));
    }

    /// Forgets the files that are not in `present` any more.
    pub fn keep_only(&mut self, present: &std::collections::HashSet<String>) {
        self.files.retain(|path, _| present.contains(path));
    }
}
