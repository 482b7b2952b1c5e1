//! Safe rendering of model output (SPEC §10, SECURITY C.5): Markdown → HTML with raw HTML shown
//! as text, links only to `http:`, `https:`, `mailto:` or relative targets (opened with
//! `rel="noopener noreferrer"` and no referrer), remote images as click-to-load placeholders
//! (nothing is fetched), code blocks escaped with a copy button. The output uses a small fixed
//! set of tags and attributes, and every text and attribute value is escaped, so the same input
//! — or any prefix of it, while it streams — can never produce an active element.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Renders `markdown` to safe HTML.
pub fn render_markdown(markdown: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut out = String::with_capacity(markdown.len() + markdown.len() / 4);
    let mut closers: Vec<&'static str> = Vec::new();
    let mut in_image = 0usize;
    let mut in_head = false;
    for event in Parser::new_ext(markdown, options) {
        match event {
            // A table's header row has header cells (GitHub draws them so).
            Event::Start(Tag::TableCell) if in_head => {
                out.push_str("<th>");
                closers.push("</th>");
            }
            Event::Start(Tag::TableHead) => {
                in_head = true;
                out.push_str("<thead><tr>");
                closers.push("</tr></thead><tbody>");
            }
            Event::End(TagEnd::TableHead) => {
                in_head = false;
                if let Some(close) = closers.pop() {
                    out.push_str(close);
                }
            }
            Event::Start(tag) => {
                let close = open_tag(&mut out, tag);
                if close == IMAGE_CLOSE {
                    in_image += 1;
                }
                closers.push(close);
            }
            Event::End(end) => {
                if let Some(close) = closers.pop() {
                    if close == IMAGE_CLOSE {
                        in_image = in_image.saturating_sub(1);
                    }
                    out.push_str(close);
                }
                if matches!(end, TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::Item) {
                    out.push('\n');
                }
            }
            Event::Text(text) => escape_into(&mut out, &text),
            Event::Code(code) => {
                out.push_str("<code>");
                escape_into(&mut out, &code);
                out.push_str("</code>");
            }
            // Raw HTML is shown, never interpreted (SECURITY C5).
            Event::Html(html) | Event::InlineHtml(html) => escape_into(&mut out, &html),
            Event::InlineMath(math) | Event::DisplayMath(math) => escape_into(&mut out, &math),
            Event::FootnoteReference(name) => {
                out.push('[');
                escape_into(&mut out, &name);
                out.push(']');
            }
            Event::SoftBreak => out.push(if in_image > 0 { ' ' } else { '\n' }),
            Event::HardBreak => out.push_str("<br>"),
            Event::Rule => out.push_str("<hr>"),
            // A task list item: a checkbox that shows, never changes (no script reads it).
            Event::TaskListMarker(done) => {
                out.push_str(if done {
                    "<input type=\"checkbox\" disabled=\"\" checked=\"\" aria-label=\"done\"> "
                } else {
                    "<input type=\"checkbox\" disabled=\"\" aria-label=\"not done\"> "
                });
            }
        }
    }
    while let Some(close) = closers.pop() {
        out.push_str(close);
    }
    out
}

const IMAGE_CLOSE: &str = "</span></button>";

/// Writes the opening of `tag` and returns what closes it.
fn open_tag(out: &mut String, tag: Tag) -> &'static str {
    match tag {
        Tag::Paragraph => {
            out.push_str("<p>");
            "</p>"
        }
        Tag::Heading { level, .. } => {
            let (open, close) = heading(level);
            out.push_str(open);
            close
        }
        Tag::BlockQuote(_) => {
            out.push_str("<blockquote>");
            "</blockquote>"
        }
        Tag::CodeBlock(kind) => {
            // Copy, put into the composer, wrap long lines: the page answers these buttons.
            out.push_str("<div class=\"code\"><span class=\"code-actions\"><button type=\"button\" class=\"copy\">Copy</button><button type=\"button\" class=\"insert-code\">Insert</button><button type=\"button\" class=\"wrap-code\">Wrap</button></span><pre><code");
            if let CodeBlockKind::Fenced(lang) = kind {
                let lang: String = lang
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'))
                    .collect();
                if !lang.is_empty() {
                    out.push_str(" class=\"language-");
                    out.push_str(&lang);
                    out.push('"');
                }
            }
            out.push('>');
            "</code></pre></div>"
        }
        Tag::List(Some(start)) => {
            out.push_str(&format!("<ol start=\"{start}\">"));
            "</ol>"
        }
        Tag::List(None) => {
            out.push_str("<ul>");
            "</ul>"
        }
        Tag::Item => {
            out.push_str("<li>");
            "</li>"
        }
        Tag::Table(_) => {
            out.push_str("<table>");
            "</tbody></table>"
        }
        Tag::TableHead => {
            out.push_str("<thead><tr>");
            "</tr></thead><tbody>"
        }
        Tag::TableRow => {
            out.push_str("<tr>");
            "</tr>"
        }
        Tag::TableCell => {
            out.push_str("<td>");
            "</td>"
        }
        Tag::Emphasis => {
            out.push_str("<em>");
            "</em>"
        }
        Tag::Strong => {
            out.push_str("<strong>");
            "</strong>"
        }
        Tag::Strikethrough => {
            out.push_str("<del>");
            "</del>"
        }
        Tag::Link { dest_url, .. } => match safe_href(&dest_url) {
            Some(href) => {
                out.push_str("<a href=\"");
                escape_into(out, &href);
                out.push_str("\" rel=\"noopener noreferrer nofollow\" referrerpolicy=\"no-referrer\" target=\"_blank\">");
                "</a>"
            }
            None => {
                // Shown as text with the refused target visible on hover: nothing to click.
                out.push_str("<span class=\"refused-link\" title=\"");
                escape_into(out, &dest_url);
                out.push_str("\">");
                "</span>"
            }
        },
        Tag::Image { dest_url, .. } => {
            // Never an <img> for a remote URL: a click-to-load placeholder naming it (C3, C4).
            out.push_str("<button type=\"button\" class=\"remote-image\" data-src=\"");
            escape_into(out, &dest_url);
            out.push_str("\">external image — click to load: ");
            escape_into(out, &dest_url);
            out.push_str(" <span class=\"alt\">");
            IMAGE_CLOSE
        }
        // Anything else renders its content only.
        _ => {
            out.push_str("<span>");
            "</span>"
        }
    }
}

fn heading(level: HeadingLevel) -> (&'static str, &'static str) {
    match level {
        HeadingLevel::H1 => ("<h1>", "</h1>"),
        HeadingLevel::H2 => ("<h2>", "</h2>"),
        HeadingLevel::H3 => ("<h3>", "</h3>"),
        HeadingLevel::H4 => ("<h4>", "</h4>"),
        HeadingLevel::H5 => ("<h5>", "</h5>"),
        HeadingLevel::H6 => ("<h6>", "</h6>"),
    }
}

/// The link target if it is safe: `http:`, `https:`, `mailto:`, or relative. Browsers drop
/// tabs and newlines inside URLs and ignore leading control characters and spaces, so the check
/// looks at the URL the way a browser would (SECURITY C2).
pub fn safe_href(url: &str) -> Option<String> {
    let seen: String = url
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect::<String>()
        .trim_start_matches(|c: char| c.is_ascii_control() || c == ' ')
        .to_string();
    let lower = seen.to_ascii_lowercase();
    let allowed = ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme));
    (allowed || is_relative(&lower)).then_some(seen)
}

/// No scheme: nothing before a `:` that comes ahead of any `/`, `?` or `#`.
fn is_relative(url: &str) -> bool {
    let end = url.find(['/', '?', '#']).unwrap_or(url.len());
    !url[..end].contains(':') && !url.starts_with("//")
}

/// Escapes text for HTML content and attribute values alike.
pub fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
}
