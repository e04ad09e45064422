// The chat page of llmserve: plain JavaScript, no dependencies, served from
// the binary (api/webui). It talks to the server's own OpenAI API:
// GET v1/models for the picker and a streaming POST v1/chat/completions per
// message. The conversation lives only in this page.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const ui = {
    model: $("model"), reloadModels: $("reload-models"), transcript: $("transcript"), error: $("error"),
    composer: $("composer"), prompt: $("prompt"), send: $("send"), stop: $("stop"), clear: $("clear"),
    tps: $("tps"), status: $("status"), settings: $("settings"), apiKey: $("api-key"), system: $("system"),
    temperature: $("temperature"), topP: $("top-p"), maxTokens: $("max-tokens"), seed: $("seed"), extra: $("extra"),
  };

  // history holds the turns sent with every request: {role, content}. The
  // system prompt is not part of it; it is read from its field each time.
  let history = [];
  // controller aborts the request in flight; null when none is.
  let controller = null;

  // state is one of loading, idle, streaming, done, stopped, error; tests
  // and style sheets read it from body[data-state].
  function setState(state, message) {
    document.body.dataset.state = state;
    const streaming = state === "streaming";
    // Screen readers announce the answer once it is complete, not at
    // every token.
    ui.transcript.setAttribute("aria-busy", String(streaming));
    ui.send.disabled = streaming;
    ui.stop.disabled = !streaming;
    ui.clear.disabled = streaming;
    ui.status.textContent = message || "";
  }

  function showError(message) {
    ui.error.textContent = message;
    ui.error.hidden = !message;
  }

  function authHeaders(extra) {
    const h = Object.assign({}, extra);
    const key = ui.apiKey.value.trim();
    if (key) h.Authorization = "Bearer " + key;
    return h;
  }

  // errorText reads an error answer: OpenAI's {"error": {"message", "param"}},
  // the {"error": "..."} of the other routes, or whatever text came.
  async function errorText(res) {
    let text = "";
    try {
      text = await res.text();
    } catch (e) {
      // The body could not be read; the status is all there is.
    }
    let body = null;
    try {
      body = JSON.parse(text);
    } catch (e) {
      // Not JSON: show the text.
    }
    const err = body && body.error;
    if (err && typeof err === "object" && err.message) {
      return err.message + (err.param ? " (field: " + err.param + ")" : "");
    }
    if (typeof err === "string" && err) return err;
    const status = (res.status + " " + res.statusText).trim();
    return text ? status + ": " + text.slice(0, 500) : status;
  }

  async function loadModels() {
    showError("");
    const previous = ui.model.value;
    let res;
    try {
      res = await fetch("v1/models", { headers: authHeaders(), cache: "no-store" });
    } catch (e) {
      showError("Cannot reach the server: " + e.message);
      return;
    }
    if (!res.ok) {
      const msg = await errorText(res);
      showError("Listing the models failed: " + msg + (res.status === 401 ? " Enter the server's API key." : ""));
      return;
    }
    const list = await res.json();
    ui.model.replaceChildren();
    for (const m of list.data || []) {
      const label = m.max_model_len ? m.id + " (context " + m.max_model_len + ")" : m.id;
      ui.model.add(new Option(label, m.id));
    }
    if (previous && Array.from(ui.model.options).some((o) => o.value === previous)) ui.model.value = previous;
    ui.model.disabled = ui.model.options.length === 0;
    if (ui.model.options.length === 0) showError("The server serves no model.");
  }

  // addMessage appends a turn to the transcript and returns the element
  // that holds its text.
  function addMessage(role, text) {
    const item = document.createElement("div");
    item.className = "msg " + role;
    item.dataset.role = role;
    const who = document.createElement("div");
    who.className = "who";
    who.textContent = { user: "You", assistant: "Assistant", system: "System" }[role] || role;
    const content = document.createElement("div");
    content.className = "content";
    content.append(document.createTextNode(text));
    item.append(who, content);
    ui.transcript.append(item);
    scrollDown(true);
    return content;
  }

  function scrollDown(force) {
    const t = ui.transcript;
    if (force || t.scrollHeight - t.scrollTop - t.clientHeight < 80) t.scrollTop = t.scrollHeight;
  }

  // number reads an optional numeric field: undefined when empty, an error
  // naming the field when not a number.
  function number(input, name, integer) {
    const raw = input.value.trim();
    if (raw === "") return undefined;
    const v = Number(raw);
    if (!Number.isFinite(v) || (integer && !Number.isInteger(v))) {
      throw new Error(name + " must be " + (integer ? "a whole number" : "a number") + "; got " + JSON.stringify(raw) + ".");
    }
    return v;
  }

  // requestBody builds the body of the chat request, or throws an Error
  // that says which setting to fix.
  function requestBody(model) {
    let body = {};
    const extra = ui.extra.value.trim();
    if (extra) {
      try {
        body = JSON.parse(extra);
      } catch (e) {
        throw new Error("Extra parameters are not valid JSON: " + e.message);
      }
      if (body === null || typeof body !== "object" || Array.isArray(body)) {
        throw new Error("Extra parameters must be a JSON object, such as {\"top_k\": 40}.");
      }
    }
    const settings = {
      temperature: number(ui.temperature, "Temperature", false),
      top_p: number(ui.topP, "Top p", false),
      max_tokens: number(ui.maxTokens, "Max tokens", true),
      seed: number(ui.seed, "Seed", true),
    };
    for (const [k, v] of Object.entries(settings)) if (v !== undefined) body[k] = v;
    const messages = [];
    const system = ui.system.value.trim();
    if (system) messages.push({ role: "system", content: system });
    body.model = model;
    body.messages = messages.concat(history);
    body.stream = true;
    body.stream_options = Object.assign({}, body.stream_options, { include_usage: true });
    return body;
  }

  // readEvents calls onData with the data of each server-sent event of the
  // stream until onData returns false or the stream ends; it reports
  // whether onData ended it.
  async function readEvents(stream, onData) {
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    const boundary = /\r\n\r\n|\n\n|\r\r/;
    let buf = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        buf += decoder.decode(value, { stream: true });
        let m;
        while ((m = boundary.exec(buf)) !== null) {
          const block = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          const data = block.split(/\r\n|\n|\r/)
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).replace(/^ /, ""))
            .join("\n");
          if (data !== "" && onData(data) === false) return true;
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  // Rate is the tokens/s readout: completion tokens (from usage once it
  // comes, counted chunks until then) over the time since the request was
  // sent.
  class Rate {
    constructor() {
      this.start = performance.now();
      this.first = 0;
      this.chunks = 0;
      this.usage = null;
    }
    chunk() {
      if (!this.first) this.first = performance.now();
      this.chunks++;
    }
    show(final) {
      const tokens = this.usage ? this.usage.completion_tokens : this.chunks;
      const secs = (performance.now() - this.start) / 1000;
      const rate = secs > 0 ? tokens / secs : 0;
      let text = tokens + " tokens in " + secs.toFixed(2) + " s, " + rate.toFixed(1) + " tokens/s";
      if (this.first) text += ", first token after " + ((this.first - this.start) / 1000).toFixed(2) + " s";
      if (this.usage) text += " (prompt " + this.usage.prompt_tokens + " tokens)";
      // A request that failed before its first token has no rate to show.
      ui.tps.textContent = final && tokens === 0 && !this.usage ? "" : text;
      ui.tps.dataset.tokens = String(tokens);
      ui.tps.dataset.rate = rate.toFixed(3);
      ui.tps.dataset.chunks = String(this.chunks);
      ui.tps.dataset.final = String(final);
      if (this.usage) ui.tps.dataset.promptTokens = String(this.usage.prompt_tokens);
      else delete ui.tps.dataset.promptTokens;
    }
  }

  async function send() {
    const text = ui.prompt.value;
    if (controller || text.trim() === "") return;
    const model = ui.model.value;
    if (!model) {
      showError("There is no model to send to: reload the models (and enter the API key if the server needs one).");
      return;
    }
    showError("");
    history.push({ role: "user", content: text });
    let body;
    try {
      body = requestBody(model);
    } catch (e) {
      history.pop();
      showError(e.message);
      return;
    }
    ui.prompt.value = "";
    const userMsg = addMessage("user", text);
    const answer = addMessage("assistant", "");
    const out = answer.firstChild;
    const rate = new Rate();
    controller = new AbortController();
    setState("streaming", "Generating…");
    ui.tps.textContent = "";
    let state = "done";
    let message = "";
    try {
      const res = await fetch("v1/chat/completions", {
        method: "POST",
        headers: authHeaders({ "Content-Type": "application/json" }),
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!res.ok) throw new Error(await errorText(res));
      let finish = "";
      const ended = await readEvents(res.body, (data) => {
        if (data === "[DONE]") return false;
        let ev;
        try {
          ev = JSON.parse(data);
        } catch (e) {
          throw new Error("The server sent an event that is not JSON: " + data.slice(0, 200));
        }
        if (ev.error) throw new Error(typeof ev.error === "string" ? ev.error : ev.error.message || JSON.stringify(ev.error));
        if (ev.usage) rate.usage = ev.usage;
        for (const c of ev.choices || []) {
          if (c.index) continue; // with "n" > 1 in the extra parameters, the first choice only
          const delta = c.delta && c.delta.content;
          if (delta) {
            out.appendData(delta);
            rate.chunk();
          }
          if (c.finish_reason) finish = c.finish_reason;
        }
        rate.show(false);
        scrollDown(false);
        return true;
      });
      if (!ended) throw new Error("The connection closed before the answer was complete.");
      message = finish === "length" ? "Done: the answer reached max tokens or the context length." : "Done.";
    } catch (e) {
      if (e.name === "AbortError") {
        state = "stopped";
        message = "Stopped.";
      } else {
        state = "error";
        message = "Failed.";
        showError(e.message);
        answer.parentElement.classList.add("failed");
      }
    }
    controller = null;
    rate.show(true);
    if (out.data !== "") {
      history.push({ role: "assistant", content: out.data });
    } else {
      // Nothing came back: the turn leaves the conversation, and its text
      // goes back into the box to be sent again.
      history.pop();
      userMsg.parentElement.remove();
      answer.parentElement.remove();
      if (ui.prompt.value === "") ui.prompt.value = text;
    }
    setState(state, message);
  }

  function stop() {
    if (controller) controller.abort();
  }

  ui.composer.addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  ui.settings.addEventListener("submit", (e) => e.preventDefault());
  ui.prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") stop();
  });
  ui.stop.addEventListener("click", stop);
  ui.clear.addEventListener("click", () => {
    history = [];
    ui.transcript.replaceChildren();
    ui.tps.textContent = "";
    showError("");
    setState("idle");
    ui.prompt.focus();
  });
  ui.reloadModels.addEventListener("click", loadModels);
  ui.apiKey.addEventListener("change", loadModels);

  setState("loading", "Loading the models…");
  loadModels().then(() => {
    if (document.body.dataset.state === "loading") setState("idle");
  });
})();
