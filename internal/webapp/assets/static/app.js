// Quilt's web app: uploads (drag and drop, pickers, resumable chunks),
// the share dialog and the share links page. Everything else is plain
// links and forms that work without this script.
(function () {
	'use strict';
	const body = document.body;
	const csrf = body.dataset.csrf || '';
	const user = body.dataset.user || '';

	async function api(method, url, data, extra) {
		const headers = Object.assign({ 'X-CSRF-Token': csrf, 'X-Requested-With': 'quilt' }, extra || {});
		const init = { method, headers, credentials: 'same-origin' };
		if (data !== undefined) {
			headers['Content-Type'] = 'application/json';
			init.body = JSON.stringify(data);
		}
		const r = await fetch(url, init);
		let json = null;
		try { json = await r.json(); } catch (e) { json = null; }
		return { status: r.status, json: json || {} };
	}
	const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
	function pct(a, b) { return b > 0 ? Math.floor(a * 100 / b) : 100; }
	function human(n) {
		if (n < 1000) return n + ' B';
		const u = ['kB', 'MB', 'GB', 'TB'];
		let i = -1;
		do { n /= 1000; i++; } while (n >= 1000 && i < u.length - 1);
		return (n < 10 ? n.toFixed(1) : Math.round(n)) + ' ' + u[i];
	}

	// ---- uploads ----
	const sec = document.getElementById('upload');
	if (sec) initUpload(sec);

	function initUpload(sec) {
		const dir = sec.dataset.dir === '/' ? '' : sec.dataset.dir;
		const chunk = parseInt(sec.dataset.chunk, 10) || 8 << 20;
		const zone = document.getElementById('dropzone');
		let depth = 0;
		document.addEventListener('dragenter', (e) => { e.preventDefault(); depth++; zone.classList.add('over'); });
		document.addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; zone.classList.remove('over'); } });
		document.addEventListener('dragover', (e) => { e.preventDefault(); if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy'; });
		document.addEventListener('drop', (e) => {
			e.preventDefault();
			depth = 0;
			zone.classList.remove('over');
			if (!e.dataTransfer) return;
			// Items and entries must be taken during the event.
			const items = Array.from(e.dataTransfer.items || []).filter((i) => i.kind === 'file');
			const entries = items.map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
			const files = Array.from(e.dataTransfer.files || []);
			collect(entries, files).then(start);
		});
		for (const id of ['pick-files', 'pick-folder']) {
			const input = document.getElementById(id);
			input.addEventListener('change', () => {
				const list = Array.from(input.files).map((f) => ({ file: f, rel: f.webkitRelativePath || f.name }));
				input.value = '';
				start(list);
			});
		}

		// collect turns what was dropped into files with their paths: by
		// the entries (folders walked) when the browser gives them, else
		// by the files and their webkitRelativePath.
		async function collect(entries, files) {
			if (entries.length > 0 && entries.every((e) => e)) {
				const out = [];
				for (const e of entries) await walk(e, '', out);
				return out;
			}
			return files.map((f) => ({ file: f, rel: f.webkitRelativePath || f.name }));
		}
		async function walk(entry, prefix, out) {
			if (entry.isFile) {
				const f = await new Promise((res) => entry.file(res, () => res(null)));
				if (f) out.push({ file: f, rel: prefix + entry.name });
				return;
			}
			if (!entry.isDirectory) return;
			const reader = entry.createReader();
			let any = false;
			for (;;) {
				const batch = await new Promise((res) => reader.readEntries(res, () => res([])));
				if (batch.length === 0) break;
				any = true;
				for (const e of batch) await walk(e, prefix + entry.name + '/', out);
			}
			if (!any) out.push({ dir: true, rel: prefix + entry.name });
		}

		const prog = document.getElementById('progress');
		const totalBar = document.getElementById('total-progress');
		const totalText = document.getElementById('total-text');
		const list = document.getElementById('file-progress');
		let jobs = [];
		let running = 0;

		async function start(items) {
			// Empty folders: made at once, not uploaded.
			for (const it of items.filter((i) => i.dir)) {
				await api('POST', '/api/folders', { path: dir + '/' + it.rel }).catch(() => {});
			}
			items = items.filter((i) => !i.dir);
			if (items.length === 0) { finished(); return; }
			prog.hidden = false;
			for (const it of items) {
				const li = document.createElement('li');
				const name = document.createElement('span');
				name.textContent = it.rel;
				const bar = document.createElement('progress');
				bar.max = 100; bar.value = 0;
				bar.setAttribute('aria-label', it.rel);
				const txt = document.createElement('span');
				txt.className = 'pct';
				txt.textContent = '0%';
				li.append(name, bar, txt);
				list.append(li);
				jobs.push({ file: it.file, rel: it.rel, li, bar, txt, loaded: 0, state: 'queued' });
			}
			update();
			const queued = jobs.filter((j) => j.state === 'queued').length;
			for (let n = Math.min(3 - running, queued); n > 0; n--) { running++; worker(); }
		}
		async function worker() {
			for (;;) {
				const job = jobs.find((j) => j.state === 'queued');
				if (!job) break;
				job.state = 'running';
				try {
					await uploadFile(job);
					job.state = 'done';
					job.loaded = job.file.size;
					job.txt.textContent = '100%';
					job.bar.value = 100;
				} catch (err) {
					job.state = 'failed';
					job.li.classList.add('failed');
					job.txt.textContent = 'failed';
					const why = document.createElement('span');
					why.className = 'why';
					why.textContent = String(err && err.message || err);
					job.li.append(why);
				}
				update();
			}
			running--;
			if (running === 0) finished();
		}
		function update() {
			let total = 0, loaded = 0, done = 0, failed = 0;
			for (const j of jobs) {
				total += j.file.size; loaded += Math.min(j.loaded, j.file.size);
				if (j.state === 'done') done++;
				if (j.state === 'failed') failed++;
			}
			const all = jobs.every((j) => j.state === 'done' || j.state === 'failed');
			const p = all && failed === 0 ? 100 : Math.min(99, pct(loaded, total));
			totalBar.value = p;
			totalText.textContent = `${done} of ${jobs.length} files, ${human(loaded)} of ${human(total)} (${p}%)` + (failed ? `, ${failed} failed` : '');
		}
		async function finished() {
			update();
			// Show the new files: the listing of this page again.
			try {
				const r = await fetch(location.href, { credentials: 'same-origin' });
				const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
				const fresh = doc.getElementById('listing');
				if (fresh) document.getElementById('listing').replaceWith(fresh);
			} catch (e) { /* the listing stays as it was */ }
		}

		async function uploadFile(job) {
			const f = job.file;
			const dest = dir + '/' + job.rel;
			const key = `quilt-upload:${user}:${dest}:${f.size}:${f.lastModified}`;
			let id = localStorage.getItem(key);
			let off = 0;
			if (id) {
				const r = await api('GET', '/api/uploads/' + id);
				if (r.status === 200) off = r.json.offset;
				else { id = null; localStorage.removeItem(key); }
			}
			if (!id) {
				const r = await api('POST', '/api/uploads', { path: dest, size: f.size, mtime: f.lastModified });
				if (r.status !== 201) throw new Error(r.json.error || ('HTTP ' + r.status));
				id = r.json.id;
				localStorage.setItem(key, id);
			} else if (off > 0) {
				job.li.dataset.resumed = String(off);
			}
			const show = (n) => {
				job.loaded = n;
				const p = pct(n, f.size);
				job.bar.value = Math.min(p, 99);
				job.txt.textContent = Math.min(p, 99) + '%';
				update();
			};
			show(off);
			let failures = 0;
			for (;;) {
				while (off < f.size) {
					const end = Math.min(f.size, off + chunk);
					let r;
					try {
						r = await putChunk(id, off, f.slice(off, end), (n) => show(off + n));
					} catch (e) {
						// The connection broke: wait, ask where the server is, go on.
						if (++failures > 10) throw new Error('the connection keeps breaking');
						await sleep(Math.min(30000, 500 * 2 ** failures));
						try {
							const g = await api('GET', '/api/uploads/' + id);
							if (g.status === 200) off = g.json.offset;
						} catch (e2) { /* try again */ }
						continue;
					}
					if (r.status === 200 || (r.status === 409 && typeof r.json.offset === 'number')) {
						if (r.status === 200) failures = 0;
						off = r.json.offset;
						show(off);
						continue;
					}
					if (r.status === 404) localStorage.removeItem(key);
					throw new Error(r.json.error || ('HTTP ' + r.status));
				}
				const r = await api('POST', '/api/uploads/' + id + '/finish');
				if (r.status === 200) { localStorage.removeItem(key); return; }
				if (r.status === 409 && typeof r.json.offset === 'number') { off = r.json.offset; continue; }
				if (r.status === 404) localStorage.removeItem(key);
				throw new Error(r.json.error || ('HTTP ' + r.status));
			}
		}
		function putChunk(id, off, blob, progress) {
			return new Promise((resolve, reject) => {
				const x = new XMLHttpRequest();
				x.open('PUT', '/api/uploads/' + id + '?offset=' + off);
				x.setRequestHeader('X-CSRF-Token', csrf);
				x.setRequestHeader('X-Requested-With', 'quilt');
				x.setRequestHeader('Content-Type', 'application/octet-stream');
				x.upload.onprogress = (e) => progress(e.loaded);
				x.onload = () => {
					let json = {};
					try { json = JSON.parse(x.responseText); } catch (e) { json = {}; }
					resolve({ status: x.status, json });
				};
				x.onerror = () => reject(new Error('network error'));
				x.onabort = () => reject(new Error('aborted'));
				x.send(blob);
			});
		}
	}

	// ---- confirmations of what cannot be undone ----
	for (const b of document.querySelectorAll('#empty-trash, form[action="/trash/purge"] button')) {
		b.addEventListener('click', (e) => {
			if (!confirm(b.id === 'empty-trash' ? 'Delete everything in the trash for ever?' : 'Delete this for ever?')) e.preventDefault();
		});
	}

	// ---- share dialog ----
	const dlg = document.getElementById('share-dialog');
	if (dlg) {
		let sharePath = '';
		const form = document.getElementById('share-form');
		const err = document.getElementById('share-error');
		const result = document.getElementById('share-result');
		document.addEventListener('click', (e) => {
			const b = e.target.closest('.share-open');
			if (!b) return;
			sharePath = b.dataset.path;
			document.getElementById('share-path').textContent = sharePath;
			form.reset();
			err.hidden = true;
			result.hidden = true;
			document.getElementById('share-create').hidden = false;
			dlg.showModal();
		});
		document.getElementById('share-close').addEventListener('click', () => dlg.close());
		form.addEventListener('submit', async (e) => {
			e.preventDefault();
			err.hidden = true;
			const fd = new FormData(form);
			let expires = '';
			if (fd.get('expires')) expires = new Date(fd.get('expires') + 'T23:59:59').toISOString();
			const r = await api('POST', '/api/shares', { path: sharePath, mode: fd.get('mode'), password: fd.get('password') || '', expires });
			if (r.status !== 201) {
				err.textContent = r.json.error || ('Could not make the link (HTTP ' + r.status + ').');
				err.hidden = false;
				return;
			}
			const url = document.getElementById('share-url');
			url.value = r.json.url;
			document.getElementById('share-qr').src = '/api/shares/' + encodeURIComponent(r.json.token) + '/qr.svg';
			result.hidden = false;
			document.getElementById('share-create').hidden = true;
			url.focus();
			url.select();
		});
	}

	// ---- share links page ----
	const shares = document.getElementById('shares');
	if (shares) loadShares();
	async function loadShares() {
		const status = document.getElementById('shares-status');
		const r = await api('GET', '/api/shares');
		if (r.status !== 200 || !Array.isArray(r.json)) {
			status.textContent = 'Could not read your links: ' + (r.json.error || ('HTTP ' + r.status));
			return;
		}
		const tb = shares.querySelector('tbody');
		tb.textContent = '';
		for (const s of r.json) {
			const tr = document.createElement('tr');
			const cell = (t) => { const td = document.createElement('td'); td.textContent = t; tr.append(td); return td; };
			cell(s.path);
			cell((s.mode === 'upload' ? 'upload-only' : 'read-only') + (s.has_password ? ', password' : '') + (s.expired ? ', expired' : ''));
			const a = document.createElement('a');
			if (/^https?:\/\//.test(s.url)) a.href = s.url;
			a.textContent = s.url;
			cell('').append(a);
			cell(s.expires ? new Date(s.expires).toLocaleString() : 'never').className = 'date';
			const b = document.createElement('button');
			b.type = 'button'; b.className = 'act danger'; b.textContent = 'Revoke';
			b.setAttribute('aria-label', 'Revoke the link to ' + s.path);
			b.addEventListener('click', async () => {
				const d = await api('DELETE', '/api/shares/' + encodeURIComponent(s.token));
				if (d.status === 204) { tr.remove(); status.textContent = 'Revoked the link to ' + s.path + '.'; }
				else status.textContent = 'Could not revoke: ' + (d.json.error || ('HTTP ' + d.status));
			});
			cell('').append(b);
			tb.append(tr);
		}
		shares.hidden = r.json.length === 0;
		status.textContent = r.json.length === 0 ? 'You have no share links.' : r.json.length + (r.json.length === 1 ? ' link.' : ' links.');
	}
})();
