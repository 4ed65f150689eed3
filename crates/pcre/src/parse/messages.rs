//! PCRE2 10.42's compile error messages, word for word (nginx shows them in its `[emerg]`).

pub(super) const E_BACKSLASH_END: &str = "\\ at end of pattern";
pub(super) const E_C_END: &str = "\\c at end of pattern";
pub(super) const E_UNKNOWN_ESCAPE: &str = "unrecognized character follows \\";
pub(super) const E_QUANT_ORDER: &str = "numbers out of order in {} quantifier";
pub(super) const E_GROUP_BIG: &str = "subpattern number is too big";
pub(super) const E_QUANT_BIG: &str = "number too big in {} quantifier";
pub(super) const E_CLASS_END: &str = "missing terminating ] for character class";
pub(super) const E_CLASS_ESCAPE: &str = "escape sequence is invalid in character class";
pub(super) const E_RANGE_ORDER: &str = "range out of order in character class";
pub(super) const E_NOT_REPEATABLE: &str = "quantifier does not follow a repeatable item";
pub(super) const E_AFTER_QUESTION: &str = "unrecognized character after (? or (?-";
pub(super) const E_POSIX_OUTSIDE: &str = "POSIX named classes are supported only within a class";
pub(super) const E_POSIX_COLLATING: &str = "POSIX collating elements are not supported";
pub(super) const E_MISSING_PAREN: &str = "missing closing parenthesis";
pub(super) const E_NO_SUBPATTERN: &str = "reference to non-existent subpattern";
pub(super) const E_COMMENT: &str = "missing ) after (?# comment";
pub(super) const E_NESTED: &str = "parentheses are too deeply nested";
pub(super) const E_UNMATCHED_PAREN: &str = "unmatched closing parenthesis";
pub(super) const E_LOOKBEHIND: &str = "lookbehind assertion is not fixed length";
pub(super) const E_ZERO_RELATIVE: &str = "a relative value of zero is not allowed";
pub(super) const E_POSIX_UNKNOWN: &str = "unknown POSIX class name";
pub(super) const E_TOO_LARGE_CODE: &str =
    "character code point value in \\x{} or \\o{} is too large";
pub(super) const E_UNSUPPORTED_ESCAPE: &str =
    "PCRE2 does not support \\F, \\L, \\l, \\N{name}, \\U, or \\u";
pub(super) const E_AFTER_P: &str = "unrecognized character after (?P";
pub(super) const E_NAME_TERMINATOR: &str = "syntax error in subpattern name (missing terminator?)";
pub(super) const E_DUP_NAME: &str =
    "two named subpatterns have the same name (PCRE2_DUPNAMES not set)";
pub(super) const E_NAME_DIGIT: &str = "subpattern name must start with a non-digit";
pub(super) const E_NAME_LONG: &str = "subpattern name is too long (maximum 32 code units)";
pub(super) const E_INVALID_RANGE: &str = "invalid range in character class";
pub(super) const E_OCTAL_BIG: &str = "octal value is greater than \\377 in 8-bit non-UTF-8 mode";
pub(super) const E_O_BRACE: &str = "missing opening brace after \\o";
pub(super) const E_G_SYNTAX: &str =
    "\\g is not followed by a braced, angle-bracketed, or quoted name/number or by a plain number";
pub(super) const E_VERB: &str = "(*VERB) not recognized or malformed";
pub(super) const E_NAME_EXPECTED: &str = "subpattern name expected";
pub(super) const E_NON_OCTAL: &str = "non-octal character in \\o{} (closing brace missing?)";
pub(super) const E_DIFFERENT_NAMES: &str =
    "different names for subpatterns of the same number are not allowed";
pub(super) const E_NON_HEX: &str = "non-hex character in \\x{} (closing brace missing?)";
pub(super) const E_C_PRINTABLE: &str = "\\c must be followed by a printable ASCII character";
pub(super) const E_K_SYNTAX: &str =
    "\\k is not followed by a braced, angle-bracketed, or quoted name";
pub(super) const E_N_IN_CLASS: &str = "\\N is not supported in a class";
pub(super) const E_DIGITS_MISSING: &str = "digits missing in \\x{} or \\o{} or \\N{U+}";
pub(super) const E_N_U: &str = "\\N{U+dddd} is supported only in Unicode (UTF) mode";
pub(super) const E_HYPHEN: &str = "invalid hyphen in option setting";
pub(super) const E_K_LOOKAROUND: &str =
    "\\K is not allowed in lookarounds (but see PCRE2_EXTRA_ALLOW_LOOKAROUND_BSK)";
