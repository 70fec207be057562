//! docs/security.md names, for every threat, the tests that prove what it claims. A renamed or
//! deleted test must not leave the claim standing on nothing.

use std::path::Path;

fn sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".py") {
            out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
}

#[test]
fn every_test_the_threat_table_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/security.md")).unwrap();
    let mut code = String::new();
    for dir in ["src", "tests", "clients/python/tests"] {
        sources(&root.join(dir), &mut code);
    }
    let table: Vec<&str> = doc
        .lines()
        .skip_while(|l| !l.starts_with("## Threats"))
        .take_while(|l| !l.starts_with("## Who can read"))
        .filter(|l| l.starts_with('|'))
        .collect();
    assert!(table.len() > 10, "the threat table is where the doc says");
    let mut named = 0;
    for row in table {
        // The "proved by" column: the fifth cell.
        let Some(cell) = row.split(" | ").nth(4) else {
            continue;
        };
        for name in cell.split('`').skip(1).step_by(2) {
            // Test names: snake_case, and not a file, module path or metric name.
            let name = name.rsplit("::").next().unwrap();
            if name.contains(['/', '.', ' ']) || name.starts_with("gpumem_") || !name.contains('_')
            {
                continue;
            }
            named += 1;
            assert!(
                code.contains(&format!("fn {name}(")) || code.contains(&format!("def {name}(")),
                "docs/security.md names the test `{name}`, which does not exist"
            );
        }
    }
    assert!(named >= 30, "only {named} test names found in the table");
}
