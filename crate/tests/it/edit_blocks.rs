//! Edit blocks (issue 40): the parser against a corpus of answers (fenced, unfenced, several
//! files, a new file, cut off at a stop, CRLF, shell suggestions, look-alikes that are not
//! blocks), each with its expected blocks written by hand; and any re-chunking of an answer
//! parses the same as the answer whole.

use palaver::edit_blocks::{parse, EditBlockParser, Proposals};
use proptest::prelude::*;
use std::fs;
use std::path::PathBuf;

fn corpus() -> Vec<(String, String, Proposals)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/edit_blocks");
    let mut cases = Vec::new();
    for entry in fs::read_dir(&dir).expect("the corpus folder") {
        let path = entry.expect("an entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("md") {
            continue;
        }
        let name = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let answer = fs::read_to_string(&path).expect("an answer");
        let expected = fs::read_to_string(dir.join(format!("{name}.expected.json")))
            .unwrap_or_else(|_| panic!("{name}.expected.json is missing"));
        let expected: Proposals = serde_json::from_str(&expected).expect("expected proposals");
        cases.push((name, answer, expected));
    }
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(cases.len() >= 8, "the corpus has {} answers", cases.len());
    cases
}

#[test]
fn each_answer_of_the_corpus_gives_its_blocks() {
    for (name, answer, expected) in corpus() {
        assert_eq!(parse(&answer), expected, "{name}");
    }
}

#[test]
fn crlf_answers_read_as_their_lf_twins() {
    for (name, answer, expected) in corpus() {
        let crlf = answer.replace("\r\n", "\n").replace('\n', "\r\n");
        assert_eq!(parse(&crlf), expected, "{name} with CRLF");
    }
}

fn parse_in_chunks(text: &str, cuts: &[usize]) -> Proposals {
    let mut parser = EditBlockParser::default();
    let mut bounds: Vec<usize> = cuts
        .iter()
        .map(|c| c % (text.len() + 1))
        .filter(|c| text.is_char_boundary(*c))
        .collect();
    bounds.sort_unstable();
    let mut at = 0;
    for cut in bounds {
        parser.push(&text[at..cut]);
        at = cut;
    }
    parser.push(&text[at..]);
    parser.finish()
}

proptest! {
    #[test]
    fn any_chunking_of_a_corpus_answer_parses_the_same(
        which in 0usize..64,
        cuts in proptest::collection::vec(0usize..4096, 0..40),
    ) {
        let cases = corpus();
        let (name, answer, expected) = &cases[which % cases.len()];
        prop_assert_eq!(&parse_in_chunks(answer, &cuts), expected, "{}", name);
    }

    #[test]
    fn any_chunking_of_any_answer_parses_the_same(
        lines in proptest::collection::vec(prop_oneof![
            Just("<<<<<<< SEARCH"), Just("======="), Just(">>>>>>> REPLACE"), Just("```"),
            Just("```sh"), Just("```rust src/a.rs"), Just("src/a.rs"), Just("$ ls"), Just(""),
            Just("fn x() {}"), Just("text \\"), Just("a\r"), Just("é ü"),
        ], 0..40),
        cuts in proptest::collection::vec(0usize..4096, 0..20),
    ) {
        let answer = lines.join("\n");
        prop_assert_eq!(parse_in_chunks(&answer, &cuts), parse(&answer));
    }
}
