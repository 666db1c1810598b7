// The migration progress page (api/migration.go): draws the per-minute
// chart and refreshes every figure from summary.json every few seconds,
// without reloading the page. The server renders the same figures first.
(function () {
  "use strict";
  var page = document.getElementById("page");
  if (!page) {
    return;
  }
  var operator = page.dataset.operator === "true";
  var taskURL = page.dataset.taskUrl;
  // The summary's address without the login a user may have typed into
  // the page's URL (http://user:pass@host/...): the page keeps the login,
  // but fetch refuses a URL that carries credentials.
  var summaryURL = new URL(page.dataset.summary, window.location.href);
  summaryURL.username = "";
  summaryURL.password = "";
  var refreshMs = 5000;
  var chart = null;

  function cell(row, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) {
      td.className = cls;
    }
    row.appendChild(td);
    return td;
  }

  function link(href, text) {
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }

  function filterHref(code, attr, before) {
    var q = new URLSearchParams();
    q.set("code", code);
    if (attr) {
      q.set("attr", attr);
    }
    if (before) {
      q.set("before", before);
    }
    return "?" + q.toString() + "#failed";
  }

  function when(iso) {
    return iso.replace("T", " ").replace(/\.\d+/, "");
  }

  function emptyRow(tbody, cols, text) {
    var tr = document.createElement("tr");
    var td = cell(tr, text, "muted");
    td.colSpan = cols;
    tbody.appendChild(tr);
  }

  function renderCounts(s) {
    var counts = s.supplier.counts;
    document.querySelectorAll("[data-count]").forEach(function (el) {
      el.textContent = String(counts[el.dataset.count]);
    });
    // The failed and refused cards are red only when something failed.
    document.getElementById("failed-card").classList.toggle("bad", counts.failed > 0);
    document.getElementById("refused-card").classList.toggle("bad", counts.refused > 0);
    var status = document.getElementById("supplier-status");
    status.textContent = s.supplier.status;
    status.className = "status status-" + s.supplier.status;
    document.getElementById("generated-at").textContent = when(s.generated_at);
  }

  function renderTopErrors(s) {
    var tbody = document.querySelector("#top-errors tbody");
    tbody.replaceChildren();
    s.top_errors.forEach(function (e) {
      var tr = document.createElement("tr");
      cell(tr, "").appendChild(link(filterHref(e.code, e.attr), e.code));
      cell(tr, e.attr);
      cell(tr, String(e.accounts), "n");
      tbody.appendChild(tr);
    });
    if (s.top_errors.length === 0) {
      emptyRow(tbody, 3, "No failed or refused accounts.");
    }
  }

  function renderFailed(s) {
    var tbody = document.querySelector("#failed-accounts tbody");
    tbody.replaceChildren();
    s.failed.accounts.forEach(function (a) {
      var tr = document.createElement("tr");
      cell(tr, a.external_account_number);
      cell(tr, a.step);
      cell(tr, a.code);
      cell(tr, a.attr);
      var detail = cell(tr, a.detail);
      if (a.other_errors > 0) {
        var more = document.createElement("span");
        more.className = "muted";
        more.textContent = " (+" + a.other_errors + " more)";
        detail.appendChild(more);
      }
      cell(tr, when(a.failed_at));
      if (operator) {
        var task = cell(tr, "");
        // A refused account has no task.
        if (a.task_id) {
          task.appendChild(link(taskURL + a.task_id, "task"));
        }
      }
      tbody.appendChild(tr);
    });
    if (s.failed.accounts.length === 0) {
      emptyRow(tbody, operator ? 7 : 6, s.failed.code ? "No failed or refused accounts with this code." : "No failed or refused accounts.");
    }
    var next = document.getElementById("next-page");
    next.hidden = !s.failed.next;
    if (s.failed.next) {
      next.href = filterHref(s.failed.code, s.failed.attr, s.failed.next);
    }
  }

  function renderQueue(s) {
    if (!s.queue) {
      return;
    }
    document.querySelectorAll("[data-queue]").forEach(function (el) {
      el.textContent = String(s.queue[el.dataset.queue]);
    });
    document.getElementById("queue-unavailable").hidden = s.queue.available;
  }

  // chartTitle says where the chart starts: the range is the run's, from
  // its first minute with progress to now (jobs/progress, MinWindow and
  // MaxWindow), and the x axis spans exactly the points.
  function chartTitle(s) {
    var first = s.per_minute.length ? when(s.per_minute[0].minute).replace(/:00Z$/, " UTC") : "";
    document.getElementById("chart-title").textContent =
      "Completed, failed and refused per minute" + (first ? ", since " + first : "");
  }

  // showLatest puts the latest minute's figures in the legend whenever the
  // cursor is not on the chart, instead of uPlot's "--".
  function showLatest(u) {
    if (u.cursor.idx == null && u.data[0].length > 0) {
      u.setLegend({ idx: u.data[0].length - 1 });
    }
  }

  function renderChart(s) {
    var x = [], completed = [], failed = [], refused = [];
    s.per_minute.forEach(function (m) {
      x.push(Date.parse(m.minute) / 1000);
      completed.push(m.completed);
      failed.push(m.failed);
      refused.push(m.refused);
    });
    var data = [x, completed, failed, refused];
    chartTitle(s);
    var el = document.getElementById("chart");
    if (chart) {
      chart.setData(data);
      showLatest(chart);
      return;
    }
    chart = new uPlot({
      width: Math.max(el.clientWidth, 300),
      height: 240,
      // Times in UTC, as everywhere else on the page, with the zone named.
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      axes: [{ label: "Time (UTC)" }, { label: "Accounts per minute" }],
      // The x range is the points' own: no rounding out to whole hours.
      scales: { x: { time: true, range: function (u, min, max) { return [min, max]; } }, y: { range: function (u, min, max) { return [0, Math.max(max, 1)]; } } },
      series: [
        { label: "Minute", value: "{YYYY}-{MM}-{DD} {HH}:{mm} UTC" },
        { label: "Completed", stroke: "#1b7f3b", fill: "rgba(27,127,59,0.12)", width: 2 },
        { label: "Failed", stroke: "#c0392b", width: 2 },
        // The accounts refused at E3 or E4 for their data, as the red
        // card counts them (not those of a supplier that was not Ongoing).
        { label: "Refused at staging", stroke: "#d35400", width: 2, dash: [6, 4] }
      ],
      hooks: { setCursor: [showLatest] }
    }, data, el);
    showLatest(chart);
    window.addEventListener("resize", function () {
      chart.setSize({ width: Math.max(el.clientWidth, 300), height: 240 });
    });
  }

  function render(s) {
    renderCounts(s);
    renderTopErrors(s);
    renderFailed(s);
    renderQueue(s);
    renderChart(s);
    page.dataset.refreshed = String((Number(page.dataset.refreshed) || 0) + 1);
  }

  function refresh() {
    var problem = document.getElementById("refresh-error");
    return fetch(summaryURL.href, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("HTTP " + r.status);
        }
        return r.json();
      })
      .then(function (s) {
        problem.textContent = "";
        render(s);
      })
      .catch(function (err) {
        problem.textContent = "Refresh failed (" + err.message + "); retrying.";
      })
      .finally(function () {
        window.setTimeout(refresh, refreshMs);
      });
  }

  refresh();
})();
