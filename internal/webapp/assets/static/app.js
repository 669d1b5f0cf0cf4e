// Quilt's web app: uploads (drag and drop, pickers, resumable chunks),
// the share dialog (links, and shares with users and groups), the Shares
// page and the Shared with me page. Everything else is plain
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
	for (const b of document.querySelectorAll('#empty-trash, form[action="/trash/purge"] button, form[action="/users/group-rm"] button')) {
		b.addEventListener('click', (e) => {
			const q = b.id === 'empty-trash' ? 'Delete everything in the trash for ever?' :
				b.closest('form').action.endsWith('/users/group-rm') ? 'Remove this group? Its members leave it, and its shares go.' : 'Delete this for ever?';
			if (!confirm(q)) e.preventDefault();
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
			gform.reset();
			gerr.hidden = true;
			gdone.textContent = '';
			dlg.showModal();
		});
		const gform = document.getElementById('grant-form');
		const gerr = document.getElementById('grant-error');
		const gdone = document.getElementById('grant-done');
		gform.addEventListener('submit', async (e) => {
			e.preventDefault();
			gerr.hidden = true;
			gdone.textContent = '';
			const fd = new FormData(gform);
			const name = String(fd.get('name') || '').trim();
			const r = await api('POST', '/api/shares/grants', { path: sharePath, with: fd.get('kind') + ':' + name, mode: fd.get('perm') });
			if (r.status !== 201 && r.status !== 200) {
				gerr.textContent = r.json.error || ('Could not share (HTTP ' + r.status + ').');
				gerr.hidden = false;
				return;
			}
			const how = r.json.mode === 'write' ? 'read and write' : 'read-only';
			// 200: it was shared with them already; its mode is changed.
			gdone.textContent = r.status === 201 ? `Shared ${r.json.path} with the ${fd.get('kind')} ${name}, ${how}.`
				: `${r.json.path} was shared with the ${fd.get('kind')} ${name} already: now ${how}.`;
			document.getElementById('grant-name').value = '';
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

	// ---- shares with users and groups, on the Shares page ----
	const grants = document.getElementById('grants');
	if (grants) loadGrants();
	async function loadGrants() {
		const status = document.getElementById('grants-status');
		const r = await api('GET', '/api/shares/grants');
		if (r.status !== 200 || !Array.isArray(r.json)) {
			status.textContent = 'Could not read your shares: ' + (r.json.error || ('HTTP ' + r.status));
			return;
		}
		const tb = grants.querySelector('tbody');
		tb.textContent = '';
		let n = r.json.length;
		const count = () => { status.textContent = n === 0 ? 'You share nothing with users or groups.' : n + (n === 1 ? ' share.' : ' shares.'); };
		for (const g of r.json) {
			const tr = document.createElement('tr');
			const cell = (t) => { const td = document.createElement('td'); td.textContent = t; tr.append(td); return td; };
			cell(g.path);
			cell(g.with.replace(/^user:/, 'user ').replace(/^group:/, 'group '));
			cell(g.mode === 'write' ? 'read and write' : 'read-only');
			cell(new Date(g.created).toLocaleString()).className = 'date';
			const b = document.createElement('button');
			b.type = 'button'; b.className = 'act danger'; b.textContent = 'Remove';
			b.setAttribute('aria-label', 'Remove the share of ' + g.path + ' with ' + g.with);
			b.addEventListener('click', async () => {
				const d = await api('DELETE', '/api/shares/grants/' + encodeURIComponent(g.id));
				if (d.status === 204) {
					tr.remove(); n--; count();
					status.textContent = 'Removed the share of ' + g.path + ' with ' + g.with + '. ' + status.textContent;
					if (n === 0) grants.hidden = true;
				} else status.textContent = 'Could not remove: ' + (d.json.error || ('HTTP ' + d.status));
			});
			cell('').append(b);
			tb.append(tr);
		}
		grants.hidden = n === 0;
		count();
	}

	// ---- Shared with me ----
	const shared = document.getElementById('shared');
	if (shared) loadShared(shared);
	function esc(p) { return p.split('/').filter((e) => e !== '').map(encodeURIComponent).join('/'); }
	function sharedURL(id, sub) { return '/shared?id=' + encodeURIComponent(id) + (sub ? '&path=' + encodeURIComponent(sub) : ''); }
	function filesURL(id, sub) { return '/api/shares/with-me/' + encodeURIComponent(id) + '/files' + (sub ? '/' + esc(sub) : ''); }
	async function loadShared(root) {
		const status = document.getElementById('shared-status');
		const id = root.dataset.id;
		const sub = root.dataset.path;
		const r = await api('GET', '/api/shares/with-me');
		if (r.status !== 200 || !Array.isArray(r.json)) {
			status.textContent = 'Could not read what is shared with you: ' + (r.json.error || ('HTTP ' + r.status));
			return;
		}
		const may = (g) => (g.mode === 'write' ? 'read and write' : 'read-only');
		if (!id) {
			const table = document.getElementById('with-me');
			const tb = table.querySelector('tbody');
			tb.textContent = '';
			for (const g of r.json) {
				const tr = document.createElement('tr');
				tr.dataset.id = g.id;
				const cell = (t) => { const td = document.createElement('td'); td.textContent = t; tr.append(td); return td; };
				const name = cell('');
				name.className = 'name';
				if (g.gone) {
					name.textContent = g.name + ' (no longer there)';
				} else {
					const a = document.createElement('a');
					a.className = g.dir ? 'dir' : 'file';
					a.textContent = g.name + (g.dir ? '/' : '');
					if (g.dir) a.href = sharedURL(g.id, '');
					else { a.href = filesURL(g.id, ''); a.setAttribute('download', g.name); }
					name.append(a);
				}
				cell(g.owner);
				cell(may(g) + (g.with.startsWith('group:') ? ' (group ' + g.with.slice(6) + ')' : ''));
				cell(new Date(g.created).toLocaleString()).className = 'date';
				tb.append(tr);
			}
			table.hidden = r.json.length === 0;
			const n = r.json.length;
			status.textContent = n === 0 ? 'Nothing is shared with you.' : n + (n === 1 ? ' share.' : ' shares.');
			return;
		}
		const g = r.json.find((x) => x.id === id);
		if (!g || g.gone) {
			status.textContent = g ? 'The shared folder is no longer there.' : 'Nothing is shared with you under that ID: it may have been removed.';
			return;
		}
		const elems = sub ? sub.split('/') : [];
		document.getElementById('shared-h').textContent = elems.length ? elems[elems.length - 1] : g.name;
		document.title = (elems.length ? elems[elems.length - 1] : g.name) + ' · Shared with me · Quilt';
		document.getElementById('shared-meta').textContent = `Shared by ${g.owner}, ${may(g)}.`;
		const crumbs = document.getElementById('shared-crumbs');
		const crumb = (text, href) => {
			const li = document.createElement('li');
			const sep = document.createElement('span');
			sep.setAttribute('aria-hidden', 'true'); sep.textContent = '/';
			const a = document.createElement('a');
			a.href = href; a.textContent = text;
			li.append(sep, ' ', a);
			crumbs.append(li);
			return a;
		};
		let last = crumb(g.name, sharedURL(id, ''));
		for (let i = 0; i < elems.length; i++) last = crumb(elems[i], sharedURL(id, elems.slice(0, i + 1).join('/')));
		last.setAttribute('aria-current', 'page');
		if (!g.dir) {
			status.textContent = 'This share is a file: ';
			const a = document.createElement('a');
			a.href = filesURL(id, ''); a.textContent = 'download ' + g.name; a.setAttribute('download', g.name);
			status.append(a);
			return;
		}
		const table = document.getElementById('shared-listing');
		async function list() {
			const res = await fetch(filesURL(id, sub), { credentials: 'same-origin', headers: { 'X-Requested-With': 'quilt' } });
			const isFile = res.ok && (res.headers.get('Content-Disposition') || '').startsWith('attachment');
			let l = { status: res.status, json: {} };
			if (isFile) { if (res.body) res.body.cancel(); }
			else { try { l.json = (await res.json()) || {}; } catch (e) { l.json = {}; } }
			if (isFile) {
				// A file's path, not a folder's: offer its download.
				status.textContent = 'This is a file: ';
				const a = document.createElement('a');
				a.href = filesURL(id, sub); a.textContent = 'download ' + elems[elems.length - 1]; a.setAttribute('download', '');
				status.append(a);
				table.hidden = true;
				return;
			}
			if (l.status !== 200 || !Array.isArray(l.json)) {
				status.textContent = 'Could not list the folder: ' + (l.json.error || ('HTTP ' + l.status));
				table.hidden = true;
				return;
			}
			const tb = table.querySelector('tbody');
			tb.textContent = '';
			l.json.sort((a, b) => (a.dir === b.dir ? a.name.localeCompare(b.name) : a.dir ? -1 : 1));
			for (const e of l.json) {
				const tr = document.createElement('tr');
				const cell = (t) => { const td = document.createElement('td'); td.textContent = t; tr.append(td); return td; };
				const p = sub ? sub + '/' + e.name : e.name;
				const a = document.createElement('a');
				a.className = e.dir ? 'dir' : 'file';
				a.textContent = e.name + (e.dir ? '/' : '');
				a.href = e.dir ? sharedURL(id, p) : filesURL(id, p);
				if (!e.dir) a.setAttribute('download', e.name);
				cell('').append(a);
				tr.cells[0].className = 'name';
				cell(e.dir ? '' : human(e.size)).className = 'num';
				cell(e.modified ? new Date(e.modified).toLocaleString() : '').className = 'date';
				const acts = cell('');
				acts.className = 'acts';
				if (!e.dir) {
					const d = document.createElement('a');
					d.className = 'act'; d.href = filesURL(id, p); d.setAttribute('download', e.name);
					d.textContent = 'Download';
					const vh = document.createElement('span'); vh.className = 'vh'; vh.textContent = ' ' + e.name;
					d.append(vh);
					acts.append(d);
				}
				if (g.mode === 'write') {
					// A write share: its files and empty folders may be deleted.
					const del = document.createElement('button');
					del.type = 'button'; del.className = 'act danger'; del.textContent = 'Delete';
					const vh = document.createElement('span'); vh.className = 'vh'; vh.textContent = ' ' + e.name;
					del.append(vh);
					del.addEventListener('click', async () => {
						if (!confirm(`Delete ${e.name} from ${g.owner}'s folder? It does not go to a trash.`)) return;
						const d = await api('DELETE', filesURL(id, p));
						if (d.status === 204) { await list(); status.textContent = 'Deleted ' + e.name + '. ' + status.textContent; }
						else status.textContent = 'Could not delete ' + e.name + ': ' + (d.json.error || ('HTTP ' + d.status));
					});
					acts.append(' ', del);
				}
				tb.append(tr);
			}
			if (l.json.length === 0) {
				const tr = document.createElement('tr');
				const td = document.createElement('td');
				td.colSpan = 4; td.className = 'empty'; td.textContent = 'This folder is empty.';
				tr.append(td); tb.append(tr);
			}
			table.hidden = false;
			status.textContent = l.json.length + (l.json.length === 1 ? ' item.' : ' items.');
		}
		await list();
		if (g.mode !== 'write') return;
		// A write share: upload files into this folder, one PUT each.
		const up = document.getElementById('shared-upload');
		const pick = document.getElementById('shared-pick');
		const upText = document.getElementById('shared-up-text');
		const upList = document.getElementById('shared-up-list');
		up.hidden = false;
		pick.addEventListener('change', async () => {
			const fs = Array.from(pick.files);
			pick.value = '';
			let done = 0, failed = 0;
			for (const f of fs) {
				const li = document.createElement('li');
				const name = document.createElement('span'); name.textContent = f.name;
				const bar = document.createElement('progress'); bar.max = 100; bar.value = 0; bar.setAttribute('aria-label', f.name);
				const txt = document.createElement('span'); txt.textContent = '0%';
				li.append(name, bar, txt);
				upList.append(li);
				upText.textContent = `Uploading ${f.name} (${done + failed + 1} of ${fs.length})…`;
				const r = await putFile(filesURL(id, sub ? sub + '/' + f.name : f.name), f, (n) => {
					const p = pct(n, f.size); bar.value = Math.min(p, 99); txt.textContent = Math.min(p, 99) + '%';
				}).catch((e) => ({ status: 0, json: { error: String(e && e.message || e) } }));
				if (r.status === 201) { done++; bar.value = 100; txt.textContent = 'done'; }
				else { failed++; li.classList.add('failed'); txt.textContent = 'failed: ' + (r.json.error || ('HTTP ' + r.status)); }
			}
			upText.textContent = `${done} of ${fs.length} files uploaded` + (failed ? `, ${failed} failed.` : '.');
			await list();
		});
	}
	function putFile(url, file, progress) {
		return new Promise((resolve, reject) => {
			const x = new XMLHttpRequest();
			x.open('PUT', url);
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
			x.send(file);
		});
	}
})();
