// fields.mjs: finds fields the Kubernetes API does not know in a manifest.
//
// The validators kubernetes-models ships check the types of the fields
// they know and let any other field through, as the API server's
// non-strict decoding would (it drops them, with at most a warning): a
// misspelt `readinesProbe` or a field at the wrong depth would pass.  The
// package's TypeScript declarations list every field of every type, so
// this reads them (interfaces, aliases, inline object types, arrays and
// maps) and walks each manifest against the type of its kind.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

// name -> parsed type: {k:"obj", props:Map, index:type|null} |
// {k:"arr", of} | {k:"ref", name} | {k:"any"} | {k:"union", of:[...]}
const types = new Map();
// "group/version/Kind" -> interface name
const kinds = new Map();

function stripComments(s) {
	return s.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

// A small parser for the declarations' type expressions.
class P {
	constructor(s) { this.s = s; this.i = 0; }
	ws() { while (this.i < this.s.length && /\s/.test(this.s[this.i])) this.i++; }
	peek() { this.ws(); return this.s[this.i]; }
	eat(c) {
		this.ws();
		if (this.s.startsWith(c, this.i)) { this.i += c.length; return true; }
		return false;
	}
	expect(c) {
		if (!this.eat(c))
			throw new Error(`expected ${c} at ${this.s.slice(this.i, this.i + 40)}`);
	}
	ident() {
		this.ws();
		const m = /^[A-Za-z_$][\w$.]*/.exec(this.s.slice(this.i));
		if (!m) throw new Error(`name expected at ${this.s.slice(this.i, this.i + 40)}`);
		this.i += m[0].length;
		return m[0];
	}
	str() {
		this.ws();
		const q = this.s[this.i];
		let j = this.i + 1;
		while (this.s[j] !== q) j += this.s[j] === "\\" ? 2 : 1;
		const v = this.s.slice(this.i + 1, j);
		this.i = j + 1;
		return v;
	}
	// union := postfix ('|' postfix)*
	type() {
		this.eat("|");
		const of = [this.postfix()];
		while (this.eat("|")) of.push(this.postfix());
		return of.length === 1 ? of[0] : { k: "union", of };
	}
	postfix() {
		let t = this.primary();
		while (this.s.startsWith("[]", (this.ws(), this.i))) {
			this.i += 2;
			t = { k: "arr", of: t };
		}
		return t;
	}
	primary() {
		const c = this.peek();
		if (c === "{") return this.object();
		if (c === "(") { this.expect("("); const t = this.type(); this.expect(")"); return t; }
		if (c === '"' || c === "'") { this.str(); return { k: "any" }; }
		if (/[-\d]/.test(c)) { this.ident2num(); return { k: "any" }; }
		const name = this.ident();
		if (this.eat("<")) {
			const args = [this.type()];
			while (this.eat(",")) args.push(this.type());
			this.expect(">");
			if (name === "Array") return { k: "arr", of: args[0] };
			if (name === "Record") return { k: "obj", props: new Map(), index: args[1] };
			return { k: "any" };
		}
		if (["string", "number", "boolean", "null", "undefined", "any",
		    "unknown", "object", "true", "false", "never"].includes(name))
			return { k: "any" };
		return { k: "ref", name };
	}
	ident2num() {
		const m = /^-?[\d.eE+-]+/.exec(this.s.slice(this.i));
		this.i += m[0].length;
	}
	// { "a"?: T; b: T; [key: string]: T; }
	object() {
		this.expect("{");
		const props = new Map();
		let index = null;
		while (!this.eat("}")) {
			if (this.eat("[")) {
				this.ident(); this.expect(":"); this.ident(); this.expect("]");
				this.expect(":");
				index = this.type();
			} else {
				const c = this.peek();
				const name = c === '"' || c === "'" ? this.str() : this.ident();
				this.eat("?");
				this.expect(":");
				props.set(name, this.type());
			}
			this.eat(";") || this.eat(",");
		}
		return { k: "obj", props, index };
	}
}

// Each file declares short names (IStatefulSetSpec) and exports them
// under long ones (IIoK8sApiAppsV1StatefulSetSpec) that other files
// import: the long names are the keys, short ones only within a file.
function indexFile(path) {
	const src = stripComments(readFileSync(path, "utf8"));
	const local = new Map(), long = new Map();
	let m;
	const reexp = /export type \{([^}]*)\}/g;
	while ((m = reexp.exec(src)))
		for (const part of m[1].split(",")) {
			const a = /(\w+)\s+as\s+(\w+)/.exec(part);
			if (a) long.set(a[1], a[2]);
		}
	const iface = /export interface (\w+)(?:\s+extends\s+([\w, ]+))?\s*(?=\{)/g;
	while ((m = iface.exec(src))) {
		const p = new P(src);
		p.i = iface.lastIndex;
		const t = p.object();
		// TypeMeta: apiVersion and kind, declared again in the body.
		t.extends = (m[2] || "").split(",").map((x) => x.trim())
		    .filter((x) => x && x !== "TypeMeta");
		local.set(m[1], t);
		const body = src.slice(m.index, p.i);
		const kd = /"kind":\s*"(\w+)"/.exec(body);
		const v = /"apiVersion":\s*"([^"]+)"/.exec(body);
		if (kd && v)
			kinds.set(`${v[1]}/${kd[1]}`, long.get(m[1]) || `${path}#${m[1]}`);
	}
	const alias = /export type (\w+)\s*=\s*/g;
	while ((m = alias.exec(src))) {
		const p = new P(src);
		p.i = alias.lastIndex;
		try { local.set(m[1], p.type()); } catch { /* not a type we need */ }
	}
	const key = (n) => local.has(n) ? (long.get(n) || `${path}#${n}`) : n;
	const rename = (t) => {
		if (!t) return;
		if (t.k === "ref") t.name = key(t.name);
		if (t.k === "arr") rename(t.of);
		if (t.k === "union") t.of.forEach(rename);
		if (t.k === "obj") {
			t.props.forEach(rename);
			rename(t.index);
			if (t.extends) t.extends = t.extends.map(key);
		}
	};
	for (const [n, t] of local) {
		rename(t);
		types.set(key(n), t);
	}
}

function walk(dir) {
	for (const f of readdirSync(dir)) {
		const p = join(dir, f);
		if (statSync(p).isDirectory()) {
			if (f !== "node_modules") walk(p);
		} else if (f.endsWith(".d.ts")) {
			indexFile(p);
		}
	}
}

export function load(nodeModules) {
	for (const pkg of ["kubernetes-models", "@kubernetes-models/apimachinery",
	    "@kubernetes-models/prometheus-operator"])
		walk(join(nodeModules, pkg));
}

function resolve(t, seen = 0) {
	while (t && t.k === "ref") {
		const n = types.get(t.name);
		if (!n || seen++ > 20) return { k: "any" };
		t = n;
	}
	return t;
}

function props(t) {
	const all = new Map(t.props);
	for (const b of t.extends || []) {
		const bt = resolve({ k: "ref", name: b });
		if (bt.k === "obj") for (const [k, v] of props(bt)) all.set(k, v);
	}
	return all;
}

// Appends to out each "path: field" the type t does not have.
function check(v, t, path, out) {
	t = resolve(t);
	if (v === null || v === undefined || !t) return;
	if (t.k === "union") {
		// The member that fits the value's shape.
		const m = t.of.map((x) => resolve(x)).find((x) =>
		    Array.isArray(v) ? x.k === "arr" : typeof v === "object" && x.k === "obj");
		if (m) check(v, m, path, out);
		return;
	}
	if (t.k === "arr" && Array.isArray(v)) {
		v.forEach((x, i) => check(x, t.of, `${path}[${i}]`, out));
		return;
	}
	if (t.k === "obj" && typeof v === "object" && !Array.isArray(v)) {
		const known = props(t);
		for (const [k, x] of Object.entries(v)) {
			if (known.has(k))
				check(x, known.get(k), `${path}.${k}`, out);
			else if (t.index)
				check(x, t.index, `${path}.${k}`, out);
			else
				out.push(`${path}: unknown field "${k}"`);
		}
	}
}

// The unknown fields of one manifest, or a reason it cannot be checked.
export function unknownFields(doc) {
	const name = kinds.get(`${doc.apiVersion}/${doc.kind}`);
	if (!name)
		return [`no type for ${doc.apiVersion} ${doc.kind}`];
	const out = [];
	check(doc, { k: "ref", name }, `${doc.kind}/${doc.metadata?.name}`, out);
	return out;
}
