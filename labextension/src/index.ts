/**
 * mkl-notebook: keeps the mkl runs of a notebook in the notebook's own metadata.
 *
 * A kernel cannot write its notebook's metadata. When `%load_ext mkl_notebook` runs, the kernel opens a
 * comm to this extension (target `mkl.metadata`). The extension answers with the runs the metadata
 * holds (`metadata.mkl.runs`), so the kernel can take them up without reading the file, and from then
 * on writes each checkpoint the kernel sends into `metadata.mkl.runs[RUN]`. Those survive Clear All
 * Outputs, nbstripout and git. The checkpoints are data only: nothing of them is rendered here, and the
 * kernel verifies what it is handed like any checkpoint from a file.
 *
 * The hello also names the Jupyter server's authenticated user, as this page got it from the server's
 * identity API (`/api/me`): the kernel records a click from this page (its messages' session) as that user's,
 * claimed: it cannot tell this page's hello from one another client of the kernel sends.
 *
 * A page that did not draw a run's view (reloaded, opened since) knows none of its outputs' display ids: the
 * kernel sends it each redraw of an output with the place the output stands in (`metadata.mkl.place`), and this
 * extension redraws the output standing there.
 *
 * Shared in real time, it keeps the runs' views true in every person's page (see collaboration.ts).
 *
 * It also keeps the forms' widget models out of the widget state a saved notebook carries, and hides the forms a
 * notebook was opened with once its kernel turns out not to hold them (see formstate.ts).
 *
 * And it adds the inbox to the left sidebar: every question waiting under the server's folder (see inbox.ts).
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { followCollaborators } from './collaboration';
import { dropSavedForms, hideDeadForms, keepFormsOutOfSavedState } from './formstate';
import { addInbox } from './inbox';

const TARGET = 'mkl.metadata';
const KEY = 'mkl';

type Runs = { [run: string]: unknown };

/** The part of a code cell's outputs (`IOutputAreaModel`, of @jupyterlab/outputarea) a redraw uses. */
interface IOutputAreaModel {
  readonly length: number;
  get(index: number): { metadata: unknown; toJSON(): { data?: unknown } };
  set(index: number, output: { output_type: string; data: any; metadata: any }): void;
}

function isObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The runs of the notebook's metadata, keyed by run id. */
function savedRuns(panel: NotebookPanel): Runs {
  const mkl = panel.content.model?.getMetadata(KEY);
  return isObject(mkl) && isObject(mkl.runs) ? { ...mkl.runs } : {};
}

/** Write `runs` (sorted by run id, so that the saved file does not change with the order of writes). */
function writeRuns(panel: NotebookPanel, runs: Runs): void {
  const model = panel.content.model;
  if (!model) {
    return;
  }
  const mkl = model.getMetadata(KEY);
  const sorted: Runs = {};
  for (const run of Object.keys(runs).sort()) {
    sorted[run] = runs[run];
  }
  const next = { ...(isObject(mkl) ? mkl : {}), runs: sorted };
  if (Object.keys(sorted).length === 0) {
    delete (next as { [key: string]: unknown }).runs;
  }
  if (JSON.stringify(next) !== JSON.stringify(mkl ?? {})) {
    model.setMetadata(KEY, next);
  }
}

/** The place an output of a run's view stands in (`metadata.mkl.place`), if it is one. */
function placeOf(metadata: unknown): string | null {
  const mkl = isObject(metadata) ? metadata[KEY] : null;
  return isObject(mkl) && typeof mkl.place === 'string' ? mkl.place : null;
}

/** Redraw the output standing in `place` with what the kernel draws there now. The page that ran the cell has
 * drawn it already (by its display id: nothing changes then); a page that did not (reloaded, a collaborator's)
 * knows no display id, and would otherwise show the view as it was when the page was opened. */
function draw(panel: NotebookPanel, place: string, data: { [key: string]: unknown }, metadata: unknown): void {
  const model = panel.content.model;
  if (!model || placeOf(metadata) !== place || panel.context.model.collaborative === true) {
    return; // (shared in real time, every page follows the outputs the page that ran the cell redraws)
  }
  for (const cell of model.cells) {
    if (cell.type !== 'code') {
      continue;
    }
    const outputs = (cell as unknown as { outputs: IOutputAreaModel }).outputs;
    for (let index = 0; index < outputs.length; index++) {
      const output = outputs.get(index);
      if (placeOf(output.metadata) !== place) {
        continue;
      }
      const shown = output.toJSON();
      if (JSON.stringify(shown.data) !== JSON.stringify(data)) {
        outputs.set(index, { output_type: 'display_data', data: data as any, metadata: metadata as any });
      }
    }
  }
}

function onMessage(panel: NotebookPanel, msg: KernelMessage.ICommMsgMsg): void {
  const data = msg.content.data;
  if (isObject(data) && data.op === 'draw' && typeof data.place === 'string' && isObject(data.data)) {
    draw(panel, data.place, data.data, data.metadata);
    return;
  }
  if (!isObject(data) || typeof data.run !== 'string') {
    return;
  }
  const runs = savedRuns(panel);
  if (data.op === 'put' && isObject(data.envelope)) {
    if (data.envelope.run_id !== data.run) {
      return; // a checkpoint goes under its own run's id, never over another run's entry
    }
    runs[data.run] = data.envelope;
  } else if (data.op === 'delete') {
    delete runs[data.run];
  } else {
    return;
  }
  writeRuns(panel, runs);
}

/** The server's authenticated user, as its identity API told this page: its user name and the name it shows
 * (the kernel tells a server's generated "Anonymous …" user, which names no person, from a real one). */
async function serverUser(app: JupyterFrontEnd): Promise<{ user?: string; user_shown?: string }> {
  try {
    await app.serviceManager.user.ready;
    const identity = app.serviceManager.user.identity;
    return identity?.username ? { user: identity.username, user_shown: identity.display_name ?? '' } : {};
  } catch {
    return {};
  }
}

/** This page's hello: the runs its notebook's metadata holds now, and the server's user. */
async function hello(app: JupyterFrontEnd, panel: NotebookPanel): Promise<{ [key: string]: unknown }> {
  const [, user] = await Promise.all([panel.context.ready, serverUser(app)]);
  return { op: 'hello', runs: savedRuns(panel) as any, path: panel.context.path, ...user };
}

function attach(app: JupyterFrontEnd, panel: NotebookPanel, kernel: Kernel.IKernelConnection): void {
  const comms: Kernel.IComm[] = [];
  const keep = (comm: Kernel.IComm): void => {
    comms.push(comm);
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => onMessage(panel, msg);
    comm.onClose = () => {
      comms.splice(comms.indexOf(comm), 1);
    };
  };
  // The kernel opens its comm when `%load_ext mkl_notebook` runs; this page answers it with a hello.
  kernel.registerCommTarget(TARGET, (comm: Kernel.IComm) => {
    keep(comm);
    void hello(app, panel).then(said => comm.send(said as any));
  });
  // A page that comes later (reloaded, or a second page of the notebook) opens a comm of its own, when the
  // kernel has loaded mkl already: its hello is the open message.
  void kernel.requestCommInfo({ target_name: TARGET }).then(async reply => {
    const open = reply.content.status === 'ok' ? Object.keys(reply.content.comms ?? {}) : [];
    if (open.length === 0 || kernel.isDisposed) {
      return;
    }
    const comm = kernel.createComm(TARGET);
    keep(comm);
    comm.open((await hello(app, panel)) as any);
  });
  // Saved or reverted from disk: the metadata may now hold other copies of the runs than the kernel sent.
  panel.context.fileChanged.connect(() => {
    if (kernel.isDisposed) {
      return;
    }
    void hello(app, panel).then(said => comms.forEach(comm => comm.send(said as any)));
  });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'mkl-notebook:metadata',
  description: 'Keeps the mkl runs of a notebook in its metadata, and its forms out of its widget state.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    tracker.widgetAdded.connect((_tracker, panel) => {
      keepFormsOutOfSavedState(panel.context.model);
      void panel.context.ready.then(() => {
        dropSavedForms(panel.context.model);
        void hideDeadForms(panel);
        followCollaborators(panel);
      });
      panel.sessionContext.kernelChanged.connect((_context, change) => {
        if (change.newValue) {
          attach(app, panel, change.newValue);
        }
      });
      const kernel = panel.sessionContext.session?.kernel;
      if (kernel) {
        attach(app, panel, kernel);
      }
    });
  }
};

const inbox: JupyterFrontEndPlugin<void> = {
  id: 'mkl-notebook:inbox',
  description: 'Every question waiting for a person under the server folder, answered in the left sidebar.',
  autoStart: true,
  activate: (app: JupyterFrontEnd) => {
    addInbox(app);
  }
};

export default [plugin, inbox];
