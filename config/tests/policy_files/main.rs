//! Policy files as the loader reads them: the shipped schema and layers,
//! hostile files, and what the embedded default decides.

mod default_plan;
mod hostile;
mod load;
