//! Policy files (being built).
