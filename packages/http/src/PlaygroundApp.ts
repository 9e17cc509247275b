/**
 * The playground's page script (browser, ES2017, no library): the key kept in
 * `sessionStorage`, the models from `GET /api/v1/models`, the form, the estimate, submitting,
 * following the task, and its results. Every request goes to the page's own origin with the
 * key in the Authorization header, never in a URL: the events are read from a `fetch` body
 * because `EventSource` cannot send that header.
 */

/** Script text; it expects `formScript`'s functions to be defined before it. */
export const appScript = String.raw`
var keyName = "mediagate.apiKey";
var terminal = ["SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"];
var $ = function (id) { return document.getElementById(id); };
var state = { models: [], model: null, fields: [], estimate: "unknown", estimateTimer: 0, run: 0 };

function el(tag, attrs, children) {
  var node = document.createElement(tag);
  Object.keys(attrs || {}).forEach(function (name) {
    var value = attrs[name];
    if (value === undefined || value === null || value === false) return;
    if (name === "text") node.textContent = value;
    else if (name.slice(0, 2) === "on") node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  });
  (children || []).forEach(function (child) { if (child) node.appendChild(child); });
  return node;
}

function key() { return sessionStorage.getItem(keyName) || ""; }

function api(method, path, body) {
  var headers = { "Authorization": "Bearer " + key() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(path, { method: method, headers: headers, body: body === undefined ? undefined : JSON.stringify(body) })
    .then(function (response) {
      return response.text().then(function (text) {
        var envelope;
        try { envelope = JSON.parse(text); } catch (e) { envelope = { code: response.status, msg: text.slice(0, 200) }; }
        return { status: response.status, envelope: envelope };
      });
    });
}

function say(id, text, kind) {
  var node = $(id);
  node.textContent = text;
  node.className = "note" + (kind ? " " + kind : "");
}

// The key: pasted once, kept for this tab only.
function showKey() {
  var kept = key() !== "";
  $("key-form").hidden = kept;
  $("key-kept").hidden = !kept;
  if (kept) loadModels();
}

$("key-form").addEventListener("submit", function (event) {
  event.preventDefault();
  var value = $("key").value.trim();
  if (value === "") return;
  sessionStorage.setItem(keyName, value);
  $("key").value = "";
  showKey();
});

$("forget").addEventListener("click", function () {
  sessionStorage.removeItem(keyName);
  $("model").textContent = "";
  $("form-area").hidden = true;
  showKey();
});

function loadModels() {
  say("key-note", "Loading models...");
  api("GET", "/api/v1/models").then(function (answer) {
    if (answer.envelope.code !== 0) {
      say("key-note", "The models did not load: " + answer.envelope.msg, "error");
      return;
    }
    say("key-note", "");
    state.models = answer.envelope.data.models;
    var select = $("model");
    select.textContent = "";
    var groups = {};
    state.models.forEach(function (model) {
      if (!groups[model.output]) groups[model.output] = select.appendChild(el("optgroup", { label: model.output }));
      groups[model.output].appendChild(el("option", { value: model.id, text: model.id }));
    });
    $("form-area").hidden = false;
    pickModel(select.value);
  }, function (error) { say("key-note", "The models did not load: " + error.message, "error"); });
}

$("model").addEventListener("change", function () { pickModel($("model").value); });

function pickModel(id) {
  state.model = state.models.filter(function (model) { return model.id === id; })[0] || null;
  if (!state.model) return;
  state.fields = fieldsOf(state.model.inputSchema, state.model.defaults);
  var about = [state.model.output + ", " + state.model.modes.join(", "), state.model.priceRule]
    .concat(state.model.limits || []);
  var list = $("about");
  list.textContent = "";
  about.forEach(function (line) { list.appendChild(el("li", { text: line })); });
  var form = $("fields");
  form.textContent = "";
  state.fields.forEach(function (field) { form.appendChild(renderField(field)); });
  $("example").hidden = !(state.model.examples && state.model.examples.length > 0);
  changed();
}

function fieldId(field) { return "f-" + field.name; }

function renderField(field) {
  var id = fieldId(field);
  var label = el("label", { "for": id }, [
    el("span", { "class": "name", text: field.name }),
    field.required ? el("span", { "class": "required", text: "required", title: "required" }) : null
  ]);
  var control;
  if (field.kind === "select") {
    control = el("select", { id: id, name: field.name, "data-kind": "select" });
    if (!field.required || field.default === undefined) {
      control.appendChild(el("option", { value: "", text: field.required ? "choose" : "(not set)" }));
    }
    field.options.forEach(function (option) {
      control.appendChild(el("option", { value: String(option), text: String(option) + (option === field.default ? " (default)" : "") }));
    });
    if (field.default !== undefined) control.value = String(field.default);
  } else if (field.kind === "number") {
    control = el("input", { id: id, name: field.name, type: "number", "data-kind": "number", min: field.min, max: field.max, step: field.step,
      value: field.default, placeholder: field.min !== undefined && field.max !== undefined ? field.min + " to " + field.max : "" });
  } else if (field.kind === "checkbox") {
    control = el("input", { id: id, name: field.name, type: "checkbox", "data-kind": "checkbox", checked: field.default === true });
  } else if (field.kind === "textarea") {
    control = el("textarea", { id: id, name: field.name, rows: 3, "data-kind": "textarea", maxlength: field.maxLength });
  } else if (field.kind === "text") {
    control = el("input", { id: id, name: field.name, type: "text", "data-kind": "text", maxlength: field.maxLength, value: field.default });
  } else if (field.kind === "urls") {
    control = el("div", { id: id, "class": "urls", "data-kind": "urls" });
    var add = el("button", { type: "button", "class": "small", text: "Add URL", onclick: function () { addUrl(control, field, ""); changed(); } });
    control.appendChild(add);
    for (var i = 0; i < Math.max(1, field.minItems); i++) addUrl(control, field, "");
  } else {
    control = el("textarea", { id: id, name: field.name, rows: 3, "class": "fallback", "data-kind": "json", placeholder: "JSON" });
  }
  control.addEventListener("input", changed);
  control.addEventListener("change", changed);
  return el("div", { "class": "field" }, [label, control, field.description ? el("p", { "class": "hint", text: field.description }) : null]);
}

function addUrl(container, field, value) {
  var rows = container.querySelectorAll(".url-row");
  if (field.maxItems !== undefined && rows.length >= field.maxItems) return;
  var row = el("div", { "class": "url-row" }, [
    el("input", { type: "url", placeholder: "https://...", value: value }),
    el("button", { type: "button", "class": "small", text: "Remove", "aria-label": "Remove URL",
      onclick: function () { row.remove(); changed(); } })
  ]);
  container.insertBefore(row, container.lastChild);
}

function valuesOf() {
  var values = {};
  state.fields.forEach(function (field) {
    var control = $(fieldId(field));
    if (!control) return;
    if (field.kind === "checkbox") values[field.name] = control.checked;
    else if (field.kind === "urls") {
      values[field.name] = Array.prototype.map.call(control.querySelectorAll("input"), function (input) { return input.value; });
    } else values[field.name] = control.value;
  });
  return values;
}

$("example").addEventListener("click", function () {
  var example = state.model.examples[0].input;
  state.fields.forEach(function (field) {
    var control = $(fieldId(field));
    var value = example[field.name];
    if (field.kind === "checkbox") control.checked = value === undefined ? field.default === true : value === true;
    else if (field.kind === "urls") {
      Array.prototype.forEach.call(control.querySelectorAll(".url-row"), function (row) { row.remove(); });
      (value && value.length ? value : [""]).forEach(function (url) { addUrl(control, field, url); });
    } else if (field.kind === "json") control.value = value === undefined ? "" : JSON.stringify(value);
    else control.value = value === undefined ? (field.default === undefined ? "" : String(field.default)) : String(value);
  });
  changed();
});

function body() {
  var built = inputOf(state.fields, valuesOf());
  return { body: { model: state.model.id, input: built.input }, errors: built.errors };
}

// Every change: the curl text at once, the estimate after a pause in typing.
function changed() {
  if (!state.model) return;
  var built = body();
  $("curl").textContent = curlOf(location.origin, built.body);
  say("form-note", built.errors.join("; "), built.errors.length ? "error" : "");
  clearTimeout(state.estimateTimer);
  if (state.estimate !== "missing" && built.errors.length === 0) {
    state.estimateTimer = setTimeout(function () { estimate(built.body); }, 350);
  }
}

// The estimate; a server without POST /api/v1/task/estimate (404, or 405 from the task path) hides the box.
function estimate(request) {
  api("POST", "/api/v1/task/estimate", request).then(function (answer) {
    if (answer.status === 404 || answer.status === 405) {
      state.estimate = "missing";
      $("price").hidden = true;
      return;
    }
    state.estimate = "present";
    $("price").hidden = false;
    var adjustments = $("adjustments");
    adjustments.textContent = "";
    if (answer.envelope.code !== 0) {
      $("price-value").textContent = "";
      $("price-value").title = "";
      say("price-note", answer.envelope.msg, "error");
      return;
    }
    var data = answer.envelope.data;
    $("price-value").textContent = priceText(data.priceUsd);
    $("price-value").title = data.priceUsd + " USD, " + data.priceMicroUsd + " micro-USD";
    say("price-note", "");
    (data.adjustments || []).forEach(function (a) {
      adjustments.appendChild(el("li", { text: a.field + ": " + JSON.stringify(a.requested) + " \u2192 " + JSON.stringify(a.applied) + (a.reason ? " (" + a.reason + ")" : "") }));
    });
  }, function () {});
}

$("copy").addEventListener("click", function () {
  var text = $("curl").textContent;
  var done = function () { say("copy-note", "Copied."); };
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallbackCopy);
  else fallbackCopy();
  function fallbackCopy() {
    var range = document.createRange();
    range.selectNodeContents($("curl"));
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    if (document.execCommand("copy")) done(); else say("copy-note", "Selected: copy it with Ctrl+C.");
  }
});

$("task-form").addEventListener("submit", function (event) {
  event.preventDefault();
  var built = body();
  if (built.errors.length > 0) return;
  var run = ++state.run;
  $("submit").disabled = true;
  $("results").textContent = "";
  $("task").hidden = false;
  showProgress(null);
  $("logs").textContent = "";
  $("task-id").textContent = "";
  setStatus("SUBMITTING");
  api("POST", "/api/v1/task/submit", built.body).then(function (answer) {
    $("submit").disabled = false;
    if (answer.envelope.code !== 0) {
      setStatus("REFUSED", answer.envelope.msg);
      return;
    }
    var taskId = answer.envelope.data.taskId;
    $("task-id").textContent = taskId;
    follow(run, taskId, 0);
  }, function (error) {
    $("submit").disabled = false;
    setStatus("ERROR", error.message);
  });
});

function setStatus(status, detail) {
  var node = $("status");
  node.textContent = status + (detail ? ": " + detail : "");
  node.setAttribute("data-status", status);
}

// Follows the task's events until a terminal status; a stream that ends early is opened again.
function follow(run, taskId, attempt) {
  var ended = false;
  fetch("/api/v1/task/" + encodeURIComponent(taskId) + "/events", {
    headers: { "Authorization": "Bearer " + key(), "Accept": "text/event-stream" }
  }).then(function (response) {
    if (!response.ok || !response.body) throw new Error("events answered " + response.status);
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    function pump() {
      return reader.read().then(function (chunk) {
        if (run !== state.run) return reader.cancel();
        if (chunk.done) return;
        buffer += decoder.decode(chunk.value, { stream: true });
        var read = readEvents(buffer);
        buffer = read.rest;
        read.events.forEach(function (event) {
          var data;
          try { data = JSON.parse(event.data); } catch (e) { return; }
          if (event.event === "task") ended = showTask(data) || ended;
          else if (event.event === "progress") showProgress(data.progress);
        });
        return pump();
      });
    }
    return pump();
  }).catch(function () {}).then(function () {
    if (ended || run !== state.run) return;
    if (attempt >= 20) return setStatus("DISCONNECTED", "the events stream stopped; query the task with its id");
    setTimeout(function () { follow(run, taskId, attempt + 1); }, 1000);
  });
}

function showTask(task) {
  var detail = task.status === "FAILED" || task.status === "TIMEOUT" ? task.failure_reason || (task.error && task.error.message) : "";
  setStatus(task.status, detail);
  if (task.progress) showProgress(task.progress);
  var done = terminal.indexOf(task.status) >= 0;
  if (done) {
    if (task.status === "SUCCESS") showProgress({ percent: 100 });
    if (task.result) showResult(task.result);
  }
  return done;
}

function showProgress(progress) {
  var bar = $("bar");
  var percent = progress && typeof progress.percent === "number" ? progress.percent : null;
  bar.hidden = percent === null;
  if (percent !== null) bar.value = percent;
  var facts = [];
  if (progress && progress.stage) facts.push(progress.stage);
  if (progress && typeof progress.queue_position === "number") facts.push("queue position " + progress.queue_position);
  if (percent !== null) facts.push(Math.round(percent) + "%");
  $("progress-note").textContent = facts.join(" \u00b7 ");
  if (progress && progress.logs_tail && progress.logs_tail.length) {
    $("logs").textContent = [].concat(progress.logs_tail).slice(-5).join("\n");
  }
}

function showResult(result) {
  var area = $("results");
  area.textContent = "";
  var urls = result.urls || [];
  var media = el("div", { "class": result.type === "image" ? "grid" : "videos" });
  urls.forEach(function (url) {
    if (result.type === "image") media.appendChild(el("a", { href: url, target: "_blank", rel: "noopener" }, [el("img", { src: url, alt: "result image" })]));
    else if (result.type === "video") media.appendChild(el("video", { src: url, controls: true, preload: "metadata" }));
  });
  area.appendChild(media);
  area.appendChild(el("ul", { "class": "files" }, urls.map(function (url) {
    return el("li", {}, [el("a", { href: url, target: "_blank", rel: "noopener", text: url })]);
  })));
}

showKey();
`
