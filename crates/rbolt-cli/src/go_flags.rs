//! Go-style flags: Go bbolt's tool parses its command line with Go's `flag` package, which
//! spells a long flag with one dash (`-count 1000`, `-format=hex`), and scripts written for it
//! do so. clap knows only `--count`, and reads `-count` as the short flags `-c -o -u ...`, so
//! the arguments are rewritten before clap sees them: `-NAME` and `-NAME=VALUE`, where `NAME`
//! is a long flag (or one of its aliases) of the command being parsed or of a command above
//! it, become `--NAME` and `--NAME=VALUE`.
//!
//! Nothing else changes: the short flags that exist (`-o FILE`, `-p`, `-f hex`, `-fhex`) are
//! one character long and never a long flag's name; a word after `--`, one that is the value of
//! the flag before it (`--to-index -1`), a lone `-` and a negative number stay as they are. A
//! `-NAME` that names no flag goes to clap as `--NAME`, so that its error names the word and
//! the flag nearest to it (as `-NAME`, clap would report a short flag `-N` it made of it). A
//! boolean flag also takes Go's `=true`/`=false` (`-json=true`, `--json=false`), as Go's
//! `flag` does.

use clap::{ArgAction, Command};
use std::ffi::{OsStr, OsString};

/// The arguments (the program's name first) with every Go-style long flag rewritten for clap.
/// `command` is the whole command line's definition (`Cli::command()`).
pub fn normalise(args: impl IntoIterator<Item = OsString>, mut command: Command) -> Vec<OsString> {
    // Built, the definitions include the flags clap adds (`--help`, `--version`) and every
    // argument's action and number of values.
    command.build();
    let mut args = args.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    // The command being parsed, then the ones above it: a global flag is defined above.
    let mut scope: Vec<&Command> = vec![&command];
    let mut value_next = false;
    let mut rest_positional = false;
    for arg in args {
        if rest_positional || value_next {
            value_next = false;
            out.push(arg);
            continue;
        }
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            rest_positional = true;
            out.push(arg);
            continue;
        }
        let dashes = if text.starts_with("--") {
            2
        } else if text.starts_with('-') {
            1
        } else {
            0
        };
        if dashes == 0 {
            // A positional word: a subcommand's name moves the scope down.
            let current = *scope.last().expect("the scope holds the root");
            if let Some(sub) = current.find_subcommand(OsStr::new(text)) {
                scope.push(sub);
            }
            out.push(arg);
            continue;
        }
        let body = &text[dashes..];
        let (name, value) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (body, None),
        };
        let long = if dashes == 2 || name.chars().count() > 1 {
            find_long(&scope, name)
        } else {
            None
        };
        match long {
            Some(flag) => {
                value_next = value.is_none() && flag.value_follows;
                out.extend(long_form(name, value, flag.boolean));
            }
            None if dashes == 1 => match short_cluster(&scope, body) {
                Some(takes_next) => {
                    // Short flags (`-o FILE`, `-fhex`, `-p`), or a negative number: as given.
                    value_next = takes_next;
                    out.push(arg);
                }
                None => {
                    // A word that names no flag (Go's "flag provided but not defined"). As
                    // `-formats=hex` clap would read `-f` with the value `ormats=hex` and
                    // report that; as `--formats=hex` it names the word and suggests the flag
                    // nearest to it.
                    out.push(format!("--{body}").into());
                }
            },
            None => out.push(arg),
        }
    }
    out
}

/// What the rewrite needs to know of a flag.
#[derive(Clone, Copy, Debug)]
struct Flag {
    /// A separate value follows it when none is attached with `=`.
    value_follows: bool,
    /// An on/off flag that takes no value in clap (`--json`).
    boolean: bool,
    /// It takes a value, attached or (when `value_follows`) separate.
    takes_value: bool,
}

fn flag_of(arg: &clap::Arg) -> Flag {
    let action = arg.get_action();
    let takes_value = action.takes_values();
    let min_values = arg.get_num_args().map_or(1, |range| range.min_values());
    Flag {
        value_follows: takes_value && !arg.is_require_equals_set() && min_values > 0,
        boolean: matches!(action, ArgAction::SetTrue),
        takes_value,
    }
}

/// The long flag `name` (or an alias of one) in the innermost command of `scope` that has it.
fn find_long(scope: &[&Command], name: &str) -> Option<Flag> {
    scope.iter().rev().find_map(|command| {
        command.get_arguments().find_map(|arg| {
            let matches = arg.get_long() == Some(name)
                || arg
                    .get_all_aliases()
                    .is_some_and(|aliases| aliases.contains(&name));
            matches.then(|| flag_of(arg))
        })
    })
}

/// Whether `body` (a word after one dash that names no long flag) is what clap reads as short
/// flags: each character a short flag of `scope` taking no value, the last one perhaps taking
/// a value, attached (`-fhex`) or in the next word. Returns whether the next word is that
/// value, or `None` for a word no short flag explains. A negative number (`-1`) is left to
/// clap too. An attached value with `=` in it (`-formats=hex`) is taken for a mistyped long
/// flag: no value of a short flag here holds one.
fn short_cluster(scope: &[&Command], body: &str) -> Option<bool> {
    if body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Some(false);
    }
    for (at, short) in body.char_indices() {
        let Some(flag) = find_short(scope, short) else {
            // One unknown character: clap's own message names it as given.
            return (body.chars().count() == 1).then_some(false);
        };
        if flag.takes_value {
            let attached = &body[at + short.len_utf8()..];
            let attached = attached.strip_prefix('=').unwrap_or(attached);
            return if attached.contains('=') {
                None
            } else {
                Some(attached.is_empty() && flag.value_follows)
            };
        }
    }
    // Empty (a lone `-`, standard input), or flags that take no value.
    Some(false)
}

/// The short flag `short` in the innermost command of `scope` that has it.
fn find_short(scope: &[&Command], short: char) -> Option<Flag> {
    scope.iter().rev().find_map(|command| {
        command
            .get_arguments()
            .find(|arg| arg.get_short() == Some(short))
            .map(flag_of)
    })
}

/// `--name`, `--name=value`, or for a boolean flag given Go's `=true`/`=false`, the flag or
/// nothing (an unknown spelling is passed on for clap to report).
fn long_form(name: &str, value: Option<&str>, boolean: bool) -> Option<OsString> {
    let flag = format!("--{name}");
    match value {
        None => Some(flag.into()),
        Some(value) if boolean => match go_bool(value) {
            Some(true) => Some(flag.into()),
            Some(false) => None,
            None => Some(format!("{flag}={value}").into()),
        },
        Some(value) => Some(format!("{flag}={value}").into()),
    }
}

/// Go's `strconv.ParseBool`.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::normalise;
    use clap::{Arg, ArgAction, Command};

    fn command() -> Command {
        Command::new("t")
            .arg(
                Arg::new("quiet")
                    .long("quiet")
                    .global(true)
                    .action(ArgAction::SetTrue),
            )
            .subcommand(
                Command::new("get")
                    .arg(Arg::new("path"))
                    .arg(Arg::new("format").long("format").short('f'))
                    .arg(Arg::new("json").long("json").action(ArgAction::SetTrue))
                    .arg(
                        Arg::new("page")
                            .long("pageId")
                            .alias("page-id")
                            .allow_negative_numbers(true),
                    )
                    .arg(
                        Arg::new("sync")
                            .long("sync")
                            .num_args(0..=1)
                            .require_equals(true)
                            .default_missing_value("true"),
                    ),
            )
    }

    #[track_caller]
    fn check(args: &[&str], expected: &[&str]) {
        let args = std::iter::once("t")
            .chain(args.iter().copied())
            .map(Into::into);
        let out = normalise(args, command());
        let out: Vec<&str> = out[1..].iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn go_style_long_flags_become_double_dash() {
        check(
            &["get", "-format", "hex", "p"],
            &["get", "--format", "hex", "p"],
        );
        check(&["get", "-format=hex", "p"], &["get", "--format=hex", "p"]);
        check(&["get", "-pageId", "3"], &["get", "--pageId", "3"]);
        check(&["get", "-page-id=3"], &["get", "--page-id=3"]);
        // A global flag, below the command that defines it.
        check(&["get", "-quiet", "p"], &["get", "--quiet", "p"]);
        check(&["get", "-help"], &["get", "--help"]);
    }

    #[test]
    fn short_flags_values_and_positionals_stay() {
        check(&["get", "-f", "hex", "p"], &["get", "-f", "hex", "p"]);
        check(&["get", "-fhex", "p"], &["get", "-fhex", "p"]);
        // The value of a flag, even one spelled like a flag.
        check(&["get", "-f", "-json"], &["get", "-f", "-json"]);
        check(&["get", "--format", "-json"], &["get", "--format", "-json"]);
        check(&["get", "-pageId", "-1"], &["get", "--pageId", "-1"]);
        // After `--`, a lone dash, and negative numbers.
        check(&["get", "--", "-json"], &["get", "--", "-json"]);
        check(&["get", "-", "-1", "-2.5"], &["get", "-", "-1", "-2.5"]);
        check(&["get", "-f=hex", "p"], &["get", "-f=hex", "p"]);
        // Not below the command that defines it: a word naming no flag there (see below).
        check(&["-format", "get"], &["--format", "get"]);
        // A flag whose value must be attached takes no separate value.
        check(&["get", "-sync", "p"], &["get", "--sync", "p"]);
    }

    /// A word that names no flag goes to clap with two dashes, so that clap's error names it
    /// (and suggests the nearest flag) instead of reading it as short flags; one unknown
    /// character stays as it is, which clap names as well.
    #[test]
    fn words_naming_no_flag_are_reported_as_themselves() {
        check(&["get", "-bogus", "-x"], &["get", "--bogus", "-x"]);
        // `-f` takes a value, but a value with `=` is a mistyped `-format=...`.
        check(&["get", "-formats=hex"], &["get", "--formats=hex"]);
        check(&["get", "-jsn"], &["get", "--jsn"]);
        let args = normalise(["t", "get", "-formats=hex", "p"].map(Into::into), command());
        let error = command()
            .try_get_matches_from(args)
            .unwrap_err()
            .to_string();
        assert!(error.contains("'--formats'"), "{error}");
        assert!(
            error.contains("similar argument exists: '--format'"),
            "{error}"
        );
    }

    #[test]
    fn boolean_flags_take_gos_true_and_false() {
        check(&["get", "-json=true", "p"], &["get", "--json", "p"]);
        check(&["get", "-json=F", "p"], &["get", "p"]);
        check(&["get", "--json=false", "p"], &["get", "p"]);
        check(&["get", "-json=maybe"], &["get", "--json=maybe"]);
        // A flag that takes a value keeps it as given.
        check(&["get", "-sync=false"], &["get", "--sync=false"]);
    }
}
