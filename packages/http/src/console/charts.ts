/**
 * The overview's charts, drawn by uPlot (bundled into the page: a small, well-kept canvas
 * chart library) on the container elements the page has. Each chart replaces the one before
 * in its container, marks how many values it drew (`data-values`, for the tests and for
 * people reading the page's source), and puts the same figures in a table beside it, for
 * screen readers and for copying.
 */
import uPlot from "uplot"
import { $, fill, table } from "./elements.js"

const palette = ["#2563eb", "#16a34a", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#6b7280"]
const statusColours: Record<string, string> = {
  SUCCESS: "#16a34a",
  FAILURE: "#dc2626",
  TIMEOUT: "#d97706",
  CANCELLED: "#6b7280",
  PENDING: "#7c3aed",
  SUBMITTED: "#0891b2",
  PROCESSING: "#2563eb"
}

const drawn: Record<string, uPlot> = {}

function colour(name: string, index: number): string {
  return statusColours[name] || palette[index % palette.length]!
}

function width(id: string): number {
  return Math.max(320, $(id).clientWidth || 560)
}

/** Draws `options` with `data` into the container `id` (replacing what was there), with its figures' table. */
function draw(id: string, options: Omit<uPlot.Options, "width" | "height">, data: uPlot.AlignedData, figures: HTMLElement, values: number): void {
  if (drawn[id]) drawn[id]!.destroy()
  const container = $(id)
  container.textContent = ""
  container.setAttribute("data-values", String(values))
  // The legend names the series; the figures are in the table beside the chart.
  drawn[id] = new uPlot(Object.assign({ width: width(id), height: 220, legend: { live: false } }, options) as uPlot.Options, data, container)
  fill(id + "-table", [figures])
}

/** Categories along the x axis: their index as the value, their name as the tick label. */
function categoryAxis(labels: ReadonlyArray<string>): uPlot.Axis {
  return {
    splits: function() {
      return labels.map(function(_label, index) {
        return index
      })
    },
    values: function(_u: uPlot, splits: Array<number>) {
      return splits.map(function(split) {
        return labels[split] || ""
      })
    },
    rotate: labels.length > 4 ? -20 : 0,
    size: labels.length > 4 ? 70 : 40,
    gap: 4
  } as uPlot.Axis
}

/** The x scale of `count` categories: each in the middle of a slot of its own. */
function categoryScale(count: number): uPlot.Scale {
  return { time: false, auto: false, range: [-0.6, Math.max(1, count) - 0.4] }
}

/** Counts of tasks a minute by status: a line per status over the minutes of the window. */
export function tasksPerMinute(id: string, minutes: ReadonlyArray<number>, byStatus: ReadonlyArray<{ readonly status: string; readonly counts: ReadonlyArray<number> }>): void {
  const series: Array<uPlot.Series> = [{ label: "minute (UTC)" }]
  byStatus.forEach(function(line, index) {
    series.push({ label: line.status, stroke: colour(line.status, index), width: 2, points: { show: false } })
  })
  const data = [minutes.map(function(ms) {
    return ms / 1000
  })].concat(byStatus.map(function(line) {
    return line.counts.slice()
  })) as uPlot.AlignedData
  const values = byStatus.reduce(function(sum, line) {
    return sum + line.counts.reduce(function(a, b) {
      return a + b
    }, 0)
  }, 0)
  const rows = minutes.map(function(ms, index) {
    return [new Date(ms).toISOString().slice(11, 16)].concat(byStatus.map(function(line) {
      return String(line.counts[index] || 0)
    }))
  }).filter(function(row) {
    return row.slice(1).some(function(count) {
      return count !== "0"
    })
  })
  draw(id, {
    series: series,
    scales: { x: { time: true }, y: { range: function(_u: uPlot, _min: number, max: number): uPlot.Range.MinMax {
      return [0, Math.max(1, max)]
    } } },
    axes: [{}, { label: "tasks" }],
    tzDate: function(ts: number) {
      return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC")
    }
  }, data, table("Tasks per minute by status", ["minute (UTC)"].concat(byStatus.map(function(line) {
    return line.status
  })), rows, "No task in the window."), values)
}

/** Bars over named categories: one bar per series at each category, side by side. */
export function categoryBars(
  id: string,
  caption: string,
  labels: ReadonlyArray<string>,
  bars: ReadonlyArray<{ readonly label: string; readonly values: ReadonlyArray<number | null>; readonly show: (value: number) => string }>,
  yLabel: string
): void {
  const bar = uPlot.paths.bars!
  const aligns: ReadonlyArray<-1 | 0 | 1> = bars.length === 1 ? [0] : [-1, 1]
  const first: Array<uPlot.Series> = [{ label: "" }]
  const series = first.concat(bars.map(function(one, index) {
    return {
      label: one.label,
      fill: palette[index]! + "cc",
      stroke: palette[index]!,
      width: 1,
      paths: bar({ size: [bars.length === 1 ? 0.6 : 0.35, 80], align: aligns[index] || 0 }),
      points: { show: false },
      value: function(_u: uPlot, value: number | null) {
        return value === null ? "" : one.show(value)
      }
    } as uPlot.Series
  }))
  const xs: Array<Array<number | null>> = [labels.map(function(_label, index) {
    return index
  })]
  const data = xs.concat(bars.map(function(one) {
    return one.values.slice()
  })) as unknown as uPlot.AlignedData
  const values = bars.reduce(function(sum, one) {
    return sum + one.values.filter(function(value) {
      return value !== null
    }).length
  }, 0)
  const rows = labels.map(function(label, index) {
    return [label].concat(bars.map(function(one) {
      const value = one.values[index]
      return value === null || value === undefined ? "" : one.show(value)
    }))
  })
  draw(id, {
    series: series,
    scales: { x: categoryScale(labels.length), y: { range: function(_u: uPlot, _min: number, max: number): uPlot.Range.MinMax {
      return [0, max > 0 ? max * 1.1 : 1]
    } } },
    axes: [categoryAxis(labels), { label: yLabel }],
    legend: { show: bars.length > 1, live: false },
    cursor: { drag: { x: false, y: false } }
  }, data, table(caption, [""].concat(bars.map(function(one) {
    return one.label
  })), rows, "Nothing to show."), values)
}

/** Spend a day (micro-USD) as bars over the days. */
export function spendPerDay(id: string, days: ReadonlyArray<{ readonly day: number; readonly microUsd: number }>, show: (micro: number) => string): void {
  const data = [days.map(function(day) {
    return day.day / 1000
  }), days.map(function(day) {
    // A day with no spend draws no bar at all, not a flat one.
    return day.microUsd === 0 ? null : day.microUsd / 1_000_000
  })] as uPlot.AlignedData
  draw(id, {
    series: [{ label: "day (UTC)" }, {
      label: "spend (USD)",
      fill: palette[0]! + "cc",
      stroke: palette[0]!,
      paths: uPlot.paths.bars!({ size: [0.6, 40] }),
      points: { show: false },
      value: function(_u: uPlot, value: number | null) {
        return value === null ? "" : show(Math.round(value * 1_000_000))
      }
    }],
    // Half a day either side, so the first and last days' bars are whole.
    scales: { x: { time: true, range: function(_u: uPlot, min: number, max: number): uPlot.Range.MinMax {
      return [min - 43_200, max + 43_200]
    } }, y: { range: function(_u: uPlot, _min: number, max: number): uPlot.Range.MinMax {
      return [0, max > 0 ? max * 1.1 : 1]
    } } },
    axes: [{}, { label: "USD" }],
    tzDate: function(ts: number) {
      return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC")
    }
  }, data, table("Spend per day", ["day (UTC)", "spend"], days.filter(function(day) {
    return day.microUsd !== 0
  }).map(function(day) {
    return [new Date(day.day).toISOString().slice(0, 10), show(day.microUsd)]
  }), "No spend in the window."), days.filter(function(day) {
    return day.microUsd !== 0
  }).length)
}
