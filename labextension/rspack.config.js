// Merged into @jupyter/builder's Rspack config (package.json: jupyterlab.rspackConfig).
// Module ids by order, not by hashed path: the container entry's default id hashes the absolute path of
// the checkout, so the same sources built in another folder gave another remoteEntry.js, and CI could not
// check byte for byte that the committed build (../mkl_notebook/labextension) is what its sources build.
module.exports = { optimization: { moduleIds: 'natural' } };
