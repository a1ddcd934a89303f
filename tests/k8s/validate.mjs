// validate.mjs: renders packaging/k8s with `kubectl kustomize` and checks
// every object against the Kubernetes API schemas of kubernetes-models
// (and the Prometheus operator's for the ServiceMonitor), offline, plus
// unknown fields (fields.mjs) and what the deployment relies on.  TAP.
// usage: node validate.mjs K8S_DIR
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import * as k8s from "kubernetes-models";
import * as monitoring from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { load, unknownFields } from "./fields.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const top = process.argv[2];
let n = 0, failed = 0;
function ok(good, what, detail) {
	n++;
	if (!good) failed++;
	console.log(`${good ? "ok" : "not ok"} ${n} - ${what}`);
	if (!good && detail)
		for (const l of String(detail).split("\n").slice(0, 40))
			console.log(`# ${l}`);
	return good;
}

load(join(here, "node_modules"));

// The model class of an object: kubernetes-models exports each kind by
// group and version, e.g. apps/v1 StatefulSet.
async function model(doc) {
	if (doc.apiVersion === "monitoring.coreos.com/v1")
		return monitoring[doc.kind];
	const [group, version] = doc.apiVersion.includes("/") ?
	    doc.apiVersion.split("/") : ["", doc.apiVersion];
	const mod = await import(group ? `kubernetes-models/${group}/${version}` :
	    `kubernetes-models/v1`);
	return mod[doc.kind];
}

function render(dir) {
	return execFileSync("kubectl", ["kustomize", dir],
	    { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

// Checks one rendering; returns its objects.
async function checkAll(name, dir) {
	let text;
	try {
		text = render(dir);
	} catch (e) {
		ok(false, `${name}: kubectl kustomize renders`, e.stderr || e.message);
		return [];
	}
	const docs = parseAllDocuments(text).map((d) => d.toJS()).filter(Boolean);
	ok(docs.length > 0, `${name}: kubectl kustomize renders ${docs.length} objects`);
	for (const doc of docs) {
		const what = `${name}: ${doc.kind} ${doc.metadata?.name}`;
		const M = await model(doc);
		if (!ok(M !== undefined, `${what}: a known kind (${doc.apiVersion})`))
			continue;
		let err = null;
		try {
			new M(doc).validate();
		} catch (e) {
			err = e.message + (e.errors ? "\n" + JSON.stringify(e.errors, null, 1) : "");
		}
		ok(err === null, `${what}: valid against the API schema`, err);
		const extra = unknownFields(doc);
		ok(extra.length === 0, `${what}: no field the API does not know`,
		    extra.join("\n"));
	}
	return docs;
}

const base = await checkAll("base", join(top, "base"));
const ex = await checkAll("example", join(top, "overlays", "example"));

// What the deployment relies on, in the example's rendering.
const find = (docs, kind) => docs.find((d) => d.kind === kind);
const sts = find(ex, "StatefulSet");
const pod = sts?.spec?.template?.spec ?? {};
const ctr = (name) => (pod.containers || []).find((c) => c.name === name) || {};
ok(pod.nodeSelector?.["mcpvm/host"] === "true",
    "the pods run only on nodes labelled mcpvm/host=true");
ok(sts?.spec?.volumeClaimTemplates?.[0]?.spec?.storageClassName === "mcpvm-local" &&
    ctr("vmmd").volumeMounts?.some((m) => m.mountPath === "/var/lib/mcpvm"),
    "/var/lib/mcpvm is a claim of the local storage class");
ok(JSON.stringify(ctr("vmmd").lifecycle?.preStop?.exec?.command) ===
    JSON.stringify(["/usr/sbin/mcpvm-drain"]), "vmmd's preStop runs mcpvm-drain");
ok(pod.terminationGracePeriodSeconds >= 300,
    `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} leaves minutes to hibernate`);
for (const c of ["authd", "mcpd", "tls"]) {
	const s = ctr(c).securityContext || {};
	ok(s.runAsNonRoot === true && s.runAsUser > 0 && s.readOnlyRootFilesystem === true &&
	    s.allowPrivilegeEscalation === false &&
	    JSON.stringify(s.capabilities?.drop) === '["ALL"]' && !s.capabilities?.add,
	    `${c}: non-root, no capabilities, read-only root`);
}
ok(ctr("tls").readinessProbe?.httpGet?.path === "/healthz", "readiness from /healthz");
ok(ctr("netd").command?.[0] === "/usr/sbin/netd", "the example adds netd");
const cm = ex.find((d) => d.kind === "ConfigMap" && d.metadata.name.startsWith("mcpvm-config"));
ok(/uplink = eth0/.test(cm?.data?.["mcpvm.conf"] || "") &&
    pod.volumes?.some((v) => v.configMap?.name === cm?.metadata?.name),
    "the pod reads the example's mcpvm.conf from its ConfigMap");
const pdb = find(ex, "PodDisruptionBudget");
ok(pdb?.spec?.maxUnavailable === 1 && JSON.stringify(pdb.spec.selector.matchLabels) ===
    JSON.stringify(sts?.spec?.selector?.matchLabels),
    "the PodDisruptionBudget covers the StatefulSet's pods, one at a time");
const sm = find(ex, "ServiceMonitor");
const svc = find(ex, "Service");
ok(sm?.spec?.endpoints?.[0]?.port === "metrics" &&
    svc?.spec?.ports?.some((p) => p.name === "metrics") &&
    Object.entries(sm.spec.selector.matchLabels).every(([k, v]) =>
        svc.metadata.labels?.[k] === v), "the ServiceMonitor scrapes the Service's metrics port");

// The check itself finds what it is for: a misspelt field.
const bad = structuredClone(sts);
bad.spec.template.spec.containers[0].readinesProbe = {};
ok(unknownFields(bad).some((e) => e.includes('"readinesProbe"')),
    "fields.mjs reports a misspelt field");
const bad2 = structuredClone(sts);
bad2.spec.replicas = "two";
let threw = false;
try { new k8s.StatefulSet(bad2).validate(); } catch { threw = true; }
ok(threw, "the schema refuses a field of the wrong type");

console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
