// The participant's page: one question at a time, answered by a click or
// the keys 1..q; "no preference" and undo; a progress bar; thanks at the end.
(function () {
  "use strict";
  const body = document.body;
  const token = body.dataset.token;
  const display = body.dataset.display;
  const api = "/api/p/" + token;
  const optionsBox = document.getElementById("options");
  const bar = document.getElementById("bar");
  const count = document.getElementById("count");
  const undoButton = document.getElementById("undo");
  const noPref = document.getElementById("nopref");
  const message = document.getElementById("message");
  const thanks = document.getElementById("thanks");
  let question = null;
  let busy = false;

  function valuesTable(values) {
    const table = document.createElement("table");
    for (const [name, value] of Object.entries(values)) {
      const row = table.insertRow();
      row.insertCell().textContent = name;
      const cell = row.insertCell();
      cell.textContent = typeof value === "number" && !Number.isInteger(value)
        ? value.toPrecision(4) : String(value);
    }
    return table;
  }

  function mediaElement(q, i) {
    const src = "/p/" + token + "/option/" + q.question_id + "/" + i;
    const mime = (q.media && q.media[i]) || "";
    let el;
    if (mime.startsWith("image/")) { el = document.createElement("img"); el.alt = "option " + (i + 1); }
    else if (mime.startsWith("audio/")) { el = document.createElement("audio"); el.controls = true; }
    else if (mime.startsWith("video/")) { el = document.createElement("video"); el.controls = true; }
    else {
      el = document.createElement("pre");
      fetch(src).then((r) => r.text()).then((t) => { el.textContent = t; });
      return el;
    }
    el.src = src;
    return el;
  }

  function show(q) {
    question = q;
    const total = q.total || 1;
    bar.style.width = (100 * q.answered / total) + "%";
    count.textContent = q.answered + " of " + total + " answered";
    undoButton.disabled = !q.previous_id;
    optionsBox.replaceChildren();
    if (q.done) {
      noPref.hidden = true;
      thanks.hidden = false;
      return;
    }
    thanks.hidden = true;
    noPref.hidden = !q.no_preference;
    q.options.forEach((values, i) => {
      const card = document.createElement("button");
      card.type = "button";
      card.className = "option";
      card.dataset.index = String(i);
      const key = document.createElement("span");
      key.className = "key";
      key.textContent = String(i + 1);
      card.append(key);
      if (display !== "values") card.append(mediaElement(q, i));
      if (display === "values") card.append(valuesTable(values));
      card.addEventListener("click", () => send("/answer", { question_id: q.question_id, choice: i }));
      optionsBox.append(card);
    });
  }

  async function send(path, payload) {
    if (busy) return;
    busy = true;
    message.textContent = "";
    try {
      const response = await fetch(api + path, {
        method: payload === undefined ? "GET" : "POST",
        headers: { "Content-Type": "application/json" },
        body: payload === undefined ? undefined : JSON.stringify(payload),
      });
      const data = await response.json();
      if (!response.ok) {
        message.textContent = data.error || "Something went wrong.";
        if (response.status === 409) {
          const again = await fetch(api + "/question");
          if (again.ok) show(await again.json());
        }
        return;
      }
      show(data);
    } catch (err) {
      message.textContent = "The server cannot be reached; your answers so far are saved.";
    } finally {
      busy = false;
    }
  }

  document.addEventListener("keydown", (event) => {
    if (!question || question.done) return;
    const k = Number.parseInt(event.key, 10);
    if (k >= 1 && k <= question.q) send("/answer", { question_id: question.question_id, choice: k - 1 });
  });
  noPref.addEventListener("click", () => send("/answer", { question_id: question.question_id, choice: null }));
  undoButton.addEventListener("click", () => {
    if (question && question.previous_id) send("/undo", { question_id: question.previous_id });
  });
  send("/question");
})();
