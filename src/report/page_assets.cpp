#include "page_assets.h"

namespace d5::report {

const char* const kPageStyle = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0; }
header { background: #1f3a5f; color: #fff; padding: 14px 28px; }
header h1 { margin: 0 0 4px 0; font-size: 22px; }
header p { margin: 0; opacity: 0.85; font-size: 12px; }
nav { padding: 8px 28px; border-bottom: 1px solid #ddd; background: #f7f7f7; font-size: 13px; }
nav a { margin-right: 14px; color: #1f3a5f; }
main { padding: 4px 28px 40px 28px; max-width: 1400px; }
section { margin-top: 22px; }
h2 { font-size: 18px; border-bottom: 2px solid #1f3a5f; padding-bottom: 3px; }
h3 { font-size: 15px; margin: 16px 0 6px 0; }
figure { margin: 12px 0 20px 0; }
figcaption { font-size: 12px; color: #555; margin-top: 2px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0 12px 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #eef2f7; }
td { max-width: 640px; overflow-wrap: anywhere; }
.state { font-weight: 600; white-space: nowrap; }
.state-PASSED, .state-VALID { color: #1e7b34; }
.state-FAILED, .state-INVALID, .state-MISTRUSTED { color: #b3261e; }
.state-SKIPPED, .state-UNIMPLEMENTED { color: #8a6d00; }
details { margin: 8px 0; }
summary { cursor: pointer; font-weight: 600; }
#d5-status { font-size: 12px; color: #555; padding: 6px 28px; }
#d5-errors { color: #b3261e; margin: 4px 28px; }
footer { font-size: 11px; color: #777; padding: 10px 28px; border-top: 1px solid #ddd; }
)css";

const char* const kPageScript = R"js(
(function () {
  'use strict';
  var status = document.getElementById('d5-status');
  var list = document.getElementById('d5-errors');
  var drawn = 0, errors = 0, warnings = 0;
  function update() {
    status.setAttribute('data-plots-drawn', String(drawn));
    status.setAttribute('data-errors', String(errors));
    status.setAttribute('data-warnings', String(warnings));
    status.textContent = drawn + ' of ' + status.getAttribute('data-plots-expected') + ' plots drawn' +
        (errors ? ', ' + errors + ' error(s)' : '') + (warnings ? ', ' + warnings + ' warning(s)' : '');
  }
  function note(kind, message) {
    if (kind === 'error') errors += 1; else warnings += 1;
    var item = document.createElement('li');
    item.className = 'd5-' + kind;
    item.textContent = kind + ': ' + message;
    list.appendChild(item);
    list.hidden = false;
    update();
  }
  window.addEventListener('error', function (e) { note('error', e.message || String(e.error)); });
  window.addEventListener('unhandledrejection', function (e) {
    note('error', (e.reason && e.reason.message) || String(e.reason));
  });
  function finish() { update(); status.setAttribute('data-done', 'true'); }
  var specs;
  try {
    specs = JSON.parse(document.getElementById('d5-specs').textContent);
  } catch (e) {
    note('error', 'the plot data cannot be read: ' + e.message);
    return finish();
  }
  if (typeof vegaEmbed !== 'function') {
    note('error', 'vega-embed did not load, so no plot can be drawn');
    return finish();
  }
  // Vega's warnings (a bad encoding, an empty log domain) are collected, not printed to a console.
  function logger(where) {
    var level = 0;
    return {
      level: function (l) { if (arguments.length) { level = l; return this; } return level; },
      error: function () { note('error', where + ': ' + Array.prototype.join.call(arguments, ' ')); return this; },
      warn: function () { note('warning', where + ': ' + Array.prototype.join.call(arguments, ' ')); return this; },
      info: function () { return this; },
      debug: function () { return this; }
    };
  }
  var plots = document.querySelectorAll('.d5-plot');
  var jobs = Array.prototype.map.call(plots, function (el) {
    var index = Number(el.getAttribute('data-plot'));
    var where = 'plot ' + (index + 1);
    return vegaEmbed(el, specs[index], {mode: 'vega-lite', renderer: 'svg', actions: false, logger: logger(where)})
      .then(function () {
        if (el.querySelectorAll('svg g.role-mark > *').length > 0) {
          drawn += 1;
          el.setAttribute('data-drawn', 'true');
        } else {
          note('error', where + ' drew no data marks');
        }
      }, function (e) { note('error', where + ': ' + (e && e.message ? e.message : String(e))); });
  });
  update();
  Promise.all(jobs).then(finish, finish);
})();
)js";

}  // namespace d5::report
