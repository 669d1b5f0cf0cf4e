// Upload form of a Quilt share link: sends the chosen files with a
// progress bar. Without this script the form posts as plain HTML.
(function () {
  "use strict";
  var form = document.getElementById("upload");
  if (!form || !window.FormData || !window.XMLHttpRequest) return;
  var input = document.getElementById("files");
  var box = document.getElementById("progress");
  var bar = document.getElementById("bar");
  var pct = document.getElementById("pct");
  var result = document.getElementById("result");
  function show(msg, isError) {
    result.textContent = "";
    var p = document.createElement("p");
    if (isError) p.className = "error";
    p.textContent = msg;
    result.appendChild(p);
  }
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    if (!input.files.length) { show("Choose one or more files first.", true); return; }
    var data = new FormData();
    for (var i = 0; i < input.files.length; i++) data.append("file", input.files[i], input.files[i].name);
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", function (e) {
      if (!e.lengthComputable) return;
      var v = Math.floor(100 * e.loaded / e.total);
      bar.value = v;
      pct.textContent = v + "%";
    });
    xhr.addEventListener("load", function () {
      box.hidden = true;
      form.querySelector("button").disabled = false;
      var body = {};
      try { body = JSON.parse(xhr.responseText); } catch (e) { }
      var names = (body.files || []).map(function (f) { return f.name; });
      if (xhr.status >= 200 && xhr.status < 300) {
        show("Uploaded: " + names.join(", "), false);
        form.reset();
      } else {
        show((body.error || ("Upload failed (" + xhr.status + ")")) + (names.length ? ". Uploaded before that: " + names.join(", ") : ""), true);
      }
    });
    xhr.addEventListener("error", function () {
      box.hidden = true;
      form.querySelector("button").disabled = false;
      show("The upload broke off; try again.", true);
    });
    box.hidden = false;
    bar.value = 0;
    pct.textContent = "0%";
    form.querySelector("button").disabled = true;
    xhr.send(data);
  });
})();
