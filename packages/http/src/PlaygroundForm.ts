/**
 * The playground's form, as browser script: fields from a model's JSON Schema, the request
 * body from what was typed, the same request as curl, the estimate's price as people read it,
 * and the server-sent events read from a `fetch` body. It is plain ES2017 with no DOM, kept as text because it runs in the page; a
 * test evaluates this same text in Node against every model of the catalog.
 */

/** Script text defining `fieldsOf`, `inputOf`, `curlOf`, `priceText` and `readEvents`. */
export const formScript = String.raw`
function isUrlList(schema) {
  var items = schema.items;
  return schema.type === "array" && !!items && items.type === "string" &&
    (items.format === "uri" || typeof items.pattern === "string");
}

// A default the field can show: the schema's own, else the model's when it is a value of the
// field (the catalog also writes defaults in words, "chosen by the upstream", which are not).
function defaultOf(schema, modelDefault) {
  var value = schema.default !== undefined ? schema.default : modelDefault;
  if (value === undefined || value === null) return undefined;
  if (Array.isArray(schema.enum)) return schema.enum.indexOf(value) >= 0 ? value : undefined;
  if (schema.type === "integer" || schema.type === "number") return typeof value === "number" ? value : undefined;
  if (schema.type === "boolean") return typeof value === "boolean" ? value : undefined;
  if (schema.type === "string") return typeof value === "string" ? value : undefined;
  return undefined;
}

function fieldOf(name, schema, required, modelDefault) {
  var field = {
    name: name,
    required: required,
    description: typeof schema.description === "string" ? schema.description : "",
    default: defaultOf(schema, modelDefault)
  };
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    field.kind = "select";
    field.options = schema.enum.slice();
  } else if (schema.type === "integer" || schema.type === "number") {
    field.kind = "number";
    field.min = schema.minimum;
    field.max = schema.maximum;
    field.step = schema.type === "integer" ? 1 : "any";
  } else if (schema.type === "boolean") {
    field.kind = "checkbox";
  } else if (schema.type === "string") {
    field.kind = /prompt/i.test(name) || (schema.maxLength || 0) > 2048 ? "textarea" : "text";
    field.maxLength = schema.maxLength;
  } else if (isUrlList(schema)) {
    field.kind = "urls";
    field.minItems = schema.minItems || 0;
    field.maxItems = schema.maxItems;
  } else {
    field.kind = "json";
  }
  return field;
}

/** The fields of a model: required ones first, each in the schema's order. */
function fieldsOf(schema, modelDefaults) {
  var properties = (schema && schema.properties) || {};
  var required = (schema && schema.required) || [];
  var defaults = modelDefaults || {};
  var fields = Object.keys(properties).map(function (name) {
    return fieldOf(name, properties[name], required.indexOf(name) >= 0, defaults[name]);
  });
  return fields.filter(function (f) { return f.required; }).concat(fields.filter(function (f) { return !f.required; }));
}

// The input from the form's values ({ name: string | boolean | string[] }): empty optional
// fields and values equal to the default are left out, so the body says only what was chosen.
function inputOf(fields, values) {
  var input = {};
  var errors = [];
  fields.forEach(function (field) {
    var raw = values[field.name];
    var value;
    if (field.kind === "checkbox") {
      value = raw === true;
      if (field.default === undefined ? !value : value === field.default) return;
    } else if (field.kind === "urls") {
      value = (raw || []).map(function (url) { return String(url).trim(); }).filter(function (url) { return url !== ""; });
      if (value.length === 0) return;
    } else {
      var text = raw === undefined || raw === null ? "" : String(raw);
      if (text.trim() === "") return;
      if (field.kind === "select") {
        value = field.options.filter(function (option) { return String(option) === text; })[0];
        if (value === undefined) return errors.push(field.name + " must be one of " + field.options.join(", "));
      } else if (field.kind === "number") {
        value = Number(text);
        if (!isFinite(value)) return errors.push(field.name + " must be a number");
      } else if (field.kind === "json") {
        try { value = JSON.parse(text); } catch (e) { return errors.push(field.name + " is not valid JSON"); }
      } else {
        value = text;
      }
      if (!field.required && field.default !== undefined && value === field.default) return;
    }
    input[field.name] = value;
  });
  return { input: input, errors: errors };
}

function shellQuote(text) {
  return "'" + text.replace(/'/g, "'\\''") + "'";
}

// The key is the shell's variable, in double quotes so the shell expands it; never the pasted key.
function curlOf(origin, body) {
  return "curl -X POST " + origin + "/api/v1/task/submit \\\n" +
    "  -H \"Authorization: Bearer $MEDIAGATE_API_KEY\" \\\n" +
    "  -H 'Content-Type: application/json' \\\n" +
    "  -d " + shellQuote(JSON.stringify(body));
}

// A price as people read money: the estimate's priceUsd ("0.040000", six decimals) with the
// zeros after the cents dropped, "$0.04", "$0.042", "$1.50". Exact: only zeros are dropped.
function priceText(priceUsd) {
  var match = /^(\d+)(?:\.(\d*))?$/.exec(String(priceUsd));
  if (!match) return "$" + priceUsd;
  var decimals = (match[2] || "").replace(/0+$/, "");
  while (decimals.length < 2) decimals += "0";
  return "$" + match[1] + "." + decimals;
}

// Complete server-sent events in buffer, and the text after the last one (kept for the next chunk).
function readEvents(buffer) {
  var blocks = buffer.replace(/\r\n?/g, "\n").split("\n\n");
  var rest = blocks.pop();
  var events = [];
  blocks.forEach(function (block) {
    var name = "message";
    var data = [];
    block.split("\n").forEach(function (line) {
      if (line === "" || line.charAt(0) === ":") return;
      var colon = line.indexOf(":");
      var key = colon < 0 ? line : line.slice(0, colon);
      var value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (key === "event") name = value;
      else if (key === "data") data.push(value);
    });
    if (data.length > 0) events.push({ event: name, data: data.join("\n") });
  });
  return { events: events, rest: rest };
}
`

/** Names `formScript` defines, for a caller that evaluates it. */
export const formExports = ["fieldsOf", "inputOf", "curlOf", "priceText", "readEvents"] as const
