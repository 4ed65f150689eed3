//! Tokens of nginx's configuration syntax. (Implemented by the conf work item.)
