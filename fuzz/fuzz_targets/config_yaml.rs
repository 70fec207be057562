//! The configuration file parser and validation on arbitrary text.
#![no_main]

use gpumem_exporter::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(mut cfg) = Config::from_yaml(text) {
        // Validation reads the files a config names; the fuzzer tests parsing, not the disk.
        cfg.web.config_file = None;
        let _ = cfg.validate();
    }
});
