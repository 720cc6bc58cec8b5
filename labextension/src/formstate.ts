/**
 * Keeps the widget models of mkl's forms out of the widget state a notebook is saved with.
 *
 * With ipywidgets' "Save Jupyter widget state in notebooks" on, JupyterLab writes every live widget model
 * into `metadata.widgets` when the notebook is saved: about 20 models per form a run waits on, most of a
 * notebook of many waiting runs. A form says nothing its outputs do not: the question and the commands that
 * answer it are printed beside it, and without a kernel its buttons answer nothing. So the models that only
 * forms use (a form's root carries the DOM class `mkl-form`; its children, layouts and styles are found
 * through the `IPY_MODEL_` references) leave the saved state; every other widget's stay, with all they use.
 */
import { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';

export const FORM_CLASS = 'mkl-form';
const KEY = 'widgets';
const WIDGET_STATE = 'application/vnd.jupyter.widget-state+json';
const REFERENCE = /IPY_MODEL_([0-9A-Za-z_-]+)/g;

type Json = { [key: string]: unknown };

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Add to `found` the model ids `value` refers to (`IPY_MODEL_<id>`, anywhere in it). */
function references(value: unknown, found: string[]): void {
  if (typeof value === 'string') {
    REFERENCE.lastIndex = 0;
    for (let match = REFERENCE.exec(value); match !== null; match = REFERENCE.exec(value)) {
      found.push(match[1]);
    }
  } else if (Array.isArray(value)) {
    value.forEach(item => references(item, found));
  } else if (isObject(value)) {
    Object.values(value).forEach(item => references(item, found));
  }
}

/** The models of `models` that `roots` use, directly or not (the roots too). */
function reachable(models: Json, roots: string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...roots];
  while (todo.length > 0) {
    const id = todo.pop() as string;
    const model = models[id];
    if (seen.has(id) || !isObject(model)) {
      continue;
    }
    seen.add(id);
    references(model.state, todo);
  }
  return seen;
}

function isForm(model: unknown): boolean {
  const classes = isObject(model) && isObject(model.state) ? model.state._dom_classes : undefined;
  return Array.isArray(classes) && classes.includes(FORM_CLASS);
}

/** `widgets` (the `metadata.widgets` JupyterLab saves) without the models only forms use; null when it has
 * none of them. */
export function withoutForms(widgets: unknown): Json | null {
  if (!isObject(widgets)) {
    return null;
  }
  const saved = widgets[WIDGET_STATE];
  if (!isObject(saved) || !isObject(saved.state)) {
    return null;
  }
  const models = saved.state;
  const ids = Object.keys(models);
  const forms = reachable(
    models,
    ids.filter(id => isForm(models[id]))
  );
  if (forms.size === 0) {
    return null;
  }
  const kept = reachable(
    models,
    ids.filter(id => !forms.has(id))
  );
  const state: Json = {};
  for (const id of ids) {
    if (kept.has(id)) {
      state[id] = models[id];
    }
  }
  return { ...widgets, [WIDGET_STATE]: { ...saved, state } };
}

/** From now on, whenever widget state is written into `model`'s metadata (the widget manager does it as the
 * notebook is saved, before the file is written), take the forms' models out of it. */
export function keepFormsOutOfSavedState(model: INotebookModel): void {
  model.metadataChanged.connect((_model, change) => {
    if (change.key !== KEY) {
      return;
    }
    const trimmed = withoutForms(model.getMetadata(KEY));
    if (trimmed === null) {
      return;
    }
    const left = (trimmed[WIDGET_STATE] as Json).state as Json;
    if (Object.keys(left).length === 0) {
      model.deleteMetadata(KEY);
    } else {
      model.setMetadata(KEY, trimmed);
    }
  });
}

/** Take the forms' models out of the widget state `model` was opened with (nbclient and papermill save every
 * model they saw), leaving the notebook as clean or as modified as it was. The widget manager restores saved
 * state only once the kernel is connected and has told which models it holds; a form of the kernel running the
 * notebook again has the same model id as the saved one (its ids derive from where it stands), and a saved model
 * restored in between would replace the live one in the page: a stale, dead form where the run's current question
 * belongs. Nothing is lost: each form's question and commands are printed beside it. */
export function dropSavedForms(model: INotebookModel): void {
  const trimmed = withoutForms(model.getMetadata(KEY));
  if (trimmed === null) {
    return;
  }
  const dirty = model.dirty;
  const left = (trimmed[WIDGET_STATE] as Json).state as Json;
  if (Object.keys(left).length === 0) {
    model.deleteMetadata(KEY);
  } else {
    model.setMetadata(KEY, trimmed);
  }
  model.dirty = dirty;
}

const PLACE = 'application/vnd.mkl.form+json';
const VIEW = 'application/vnd.jupyter.widget-view+json';
const WIDGET_TARGET = 'jupyter.widget';

/** What is used here of an output and of a cell's outputs (`IOutputModel`, `IOutputAreaModel`). */
interface Output {
  readonly data: { readonly [mime: string]: unknown };
  toJSON(): { [key: string]: unknown };
}
interface Outputs {
  readonly length: number;
  get(index: number): Output;
  set(index: number, value: any): void;
}

/** The forms `model` holds: each widget view drawn right below a question's printed place (the output the
 * kernel marks with `application/vnd.mkl.form+json`), with the outputs that hold it. */
function formViews(model: INotebookModel): { outputs: Outputs; view: Output }[] {
  const found: { outputs: Outputs; view: Output }[] = [];
  for (const cell of model.cells) {
    const outputs = (cell as unknown as { outputs?: Outputs }).outputs;
    if (cell.type !== 'code' || !outputs) {
      continue;
    }
    for (let index = 1; index < outputs.length; index++) {
      if (PLACE in outputs.get(index - 1).data && VIEW in outputs.get(index).data) {
        found.push({ outputs, view: outputs.get(index) });
      }
    }
  }
  return found;
}

/** The model ids of the widgets `kernel` holds (ipywidgets' comms: a widget's comm id is its model id); null
 * when it cannot tell. No kernel holds none. */
async function liveWidgets(kernel: Kernel.IKernelConnection | null | undefined): Promise<Set<string> | null> {
  if (!kernel) {
    return new Set();
  }
  try {
    const reply = await kernel.requestCommInfo({ target_name: WIDGET_TARGET });
    return reply.content.status === 'ok' ? new Set(Object.keys(reply.content.comms)) : null;
  } catch {
    return null;
  }
}

/** Once the notebook's kernel is known, empty the forms it was opened with whose widgets that kernel does not
 * hold (a new kernel, or none): their saved views refer to models gone with the kernel that drew them, which
 * the widget manager draws as "Error displaying widget: model not found" (or "Loading widget..." for ever)
 * below each question. A view with no model id is hidden, as ipywidgets does for a view taken away. The
 * question and the commands that answer it stay printed above; running the cell, or `%mkl pending`, draws a
 * live form again. A page opened on the kernel that drew the forms keeps them; the notebook is left as clean
 * or as modified as it was. */
export async function hideDeadForms(panel: NotebookPanel): Promise<void> {
  const model = panel.context.model;
  const opened = formViews(model);
  if (opened.length > 0) {
    await panel.sessionContext.ready;
    const live = await liveWidgets(panel.sessionContext.session?.kernel);
    if (live !== null && !panel.isDisposed) {
      hide(model, opened, live);
    }
  }
  panel.node.dataset.mklFormsChecked = 'true'; // for whoever waits on it (the tests)
}

/** Empty the views of `opened` still in place whose model `live` lacks, leaving `model` as clean as it was. */
function hide(model: INotebookModel, opened: { outputs: Outputs; view: Output }[], live: Set<string>): void {
  const dirty = model.dirty;
  for (const { outputs, view } of opened) {
    let index = 0;
    while (index < outputs.length && outputs.get(index) !== view) {
      index++;
    }
    const shown = view.data[VIEW];
    if (index === outputs.length || !isObject(shown) || typeof shown.model_id !== 'string') {
      continue; // the cell ran again since: its outputs are new
    }
    if (shown.model_id === '' || live.has(shown.model_id)) {
      continue;
    }
    const json = view.toJSON();
    outputs.set(index, { ...json, data: { ...(json.data as Json), [VIEW]: { ...shown, model_id: '' } } });
  }
  model.dirty = dirty;
}
