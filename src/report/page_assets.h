#pragma once
// The page's style sheet and its script (page_assets.cpp). Internal to d5_report.

namespace d5::report {

extern const char* const kPageStyle;
// Draws every .d5-plot from the specs in #d5-specs with vega-embed and records, on #d5-status,
// data-plots-drawn (plots whose SVG holds data marks), data-errors, data-warnings and data-done;
// script errors and Vega warnings are listed in #d5-errors for the reader and for tests.
extern const char* const kPageScript;

}  // namespace d5::report
