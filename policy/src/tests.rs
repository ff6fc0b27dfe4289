//! Engine tests: table tests per rule, properties, and the two field
//! reports replayed as snapshot sequences.

mod overflow;
mod props;
mod replay;
mod rules;
mod settle;
mod severe;
pub(crate) mod support;
