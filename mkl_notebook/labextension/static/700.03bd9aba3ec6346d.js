"use strict";(self.rspackChunkmkl_notebook=self.rspackChunkmkl_notebook||[]).push([[700],{13(e,t,n){var o=n(14),r=n.n(o),a=n(15),i=n.n(a),s=n(16),c=n.n(s),p=new URL(n(17),n.b),l=i()(r()),u=c()(p);l.push([e.id,`

/* The inbox panel (src/inbox.ts). */
.mkl-inbox-icon {
  background-image: url(${u});
  background-repeat: no-repeat;
  background-position: center;
  background-size: 16px;
  min-width: 16px;
  min-height: 16px;
}

.mkl-inbox {
  overflow-y: auto;
  padding: 8px;
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-size: var(--jp-ui-font-size1);
}

.mkl-inbox-title {
  font-size: var(--jp-ui-font-size2);
  margin: 4px 0 8px;
}

.mkl-inbox-row {
  border-bottom: 1px solid var(--jp-border-color2);
  padding: 8px 0;
}

.mkl-inbox-ask {
  font-weight: bold;
  white-space: pre-wrap;
}

.mkl-inbox-subject {
  white-space: pre-wrap;
  max-height: 240px;
  overflow-y: auto;
}

.mkl-inbox-facts,
.mkl-inbox-where,
.mkl-inbox-open,
.mkl-inbox-status {
  color: var(--jp-ui-font-color2);
  margin-top: 4px;
}

.mkl-inbox-reply {
  width: 100%;
  box-sizing: border-box;
  margin-top: 6px;
}

.mkl-inbox-buttons {
  display: flex;
  gap: 4px;
  flex-wrap: wrap;
  margin-top: 4px;
}

.mkl-inbox-button {
  white-space: nowrap;
}

.mkl-inbox-asked {
  border-left: 3px solid var(--jp-brand-color1);
  padding-left: 6px;
}
`,""]),n.d(t,{},{A:l})},15(e){e.exports=function(e){var t=[];return t.toString=function(){return this.map(function(t){var n="",o=void 0!==t[5];return t[4]&&(n+="@supports (".concat(t[4],") {")),t[2]&&(n+="@media ".concat(t[2]," {")),o&&(n+="@layer".concat(t[5].length>0?" ".concat(t[5]):""," {")),n+=e(t),o&&(n+="}"),t[2]&&(n+="}"),t[4]&&(n+="}"),n}).join("")},t.i=function(e,n,o,r,a){"string"==typeof e&&(e=[[null,e,void 0]]);var i={};if(o)for(var s=0;s<this.length;s++){var c=this[s][0];null!=c&&(i[c]=!0)}for(var p=0;p<e.length;p++){var l=[].concat(e[p]);o&&i[l[0]]||(void 0!==a&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=a),n&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=n),r&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=r):l[4]="".concat(r)),t.push(l))}},t}},16(e){e.exports=function(e,t){return(t||(t={}),e&&(e=String(e.__esModule?e.default:e),/^['"].*['"]$/.test(e)&&(e=e.slice(1,-1)),t.hash&&(e+=t.hash),/["'() \t\n]|(%20)/.test(e)||t.needQuotes))?'"'.concat(e.replace(/"/g,'\\"').replace(/\n/g,"\\n"),'"'):e}},14(e){e.exports=function(e){return e[1]}},7(e){var t=[];function n(e){for(var n=-1,o=0;o<t.length;o++)if(t[o].identifier===e){n=o;break}return n}function o(e,o){for(var r={},a=[],i=0;i<e.length;i++){var s=e[i],c=o.base?s[0]+o.base:s[0],p=r[c]||0,l="".concat(c," ").concat(p);r[c]=p+1;var u=n(l),d={css:s[1],media:s[2],sourceMap:s[3],supports:s[4],layer:s[5]};if(-1!==u)t[u].references++,t[u].updater(d);else{var f=function(e,t){var n=t.domAPI(t);return n.update(e),function(t){t?(t.css!==e.css||t.media!==e.media||t.sourceMap!==e.sourceMap||t.supports!==e.supports||t.layer!==e.layer)&&n.update(e=t):n.remove()}}(d,o);o.byIndex=i,t.splice(i,0,{identifier:l,updater:f,references:1})}a.push(l)}return a}e.exports=function(e,r){var a=o(e=e||[],r=r||{});return function(e){e=e||[];for(var i=0;i<a.length;i++){var s=n(a[i]);t[s].references--}for(var c=o(e,r),p=0;p<a.length;p++){var l=n(a[p]);0===t[l].references&&(t[l].updater(),t.splice(l,1))}a=c}}},9(e){var t={};e.exports=function(e,n){var o=function(e){if(void 0===t[e]){var n=document.querySelector(e);if(window.HTMLIFrameElement&&n instanceof window.HTMLIFrameElement)try{n=n.contentDocument.head}catch(e){n=null}t[e]=n}return t[e]}(e);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(n)}},11(e){e.exports=function(e){var t=document.createElement("style");return e.setAttributes(t,e.attributes),e.insert(t,e.options),t}},10(e,t,n){e.exports=function(e){var t=n.nc;t&&e.setAttribute("nonce",t)}},8(e){e.exports=function(e){if("u"<typeof document)return{update:function(){},remove:function(){}};var t=e.insertStyleElement(e);return{update:function(n){var o,r,a;o="",n.supports&&(o+="@supports (".concat(n.supports,") {")),n.media&&(o+="@media ".concat(n.media," {")),(r=void 0!==n.layer)&&(o+="@layer".concat(n.layer.length>0?" ".concat(n.layer):""," {")),o+=n.css,r&&(o+="}"),n.media&&(o+="}"),n.supports&&(o+="}"),(a=n.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(a))))," */")),e.styleTagTransform(o,t,e.options)},remove:function(){var e;null===(e=t).parentNode||e.parentNode.removeChild(e)}}}},12(e){e.exports=function(e,t){if(t.styleSheet)t.styleSheet.cssText=e;else{for(;t.firstChild;)t.removeChild(t.firstChild);t.appendChild(document.createTextNode(e))}}},6(e,t,n){var o=n(7),r=n.n(o),a=n(8),i=n.n(a),s=n(9),c=n.n(s),p=n(10),l=n.n(p),u=n(11),d=n.n(u),f=n(12),m=n.n(f),v=n(13),h={};h.styleTagTransform=m(),h.setAttributes=l(),h.insert=c().bind(null,"head"),h.domAPI=i(),h.insertStyleElement=d(),r()(v.A,h),v.A&&v.A.locals&&v.A.locals},17(e){e.exports="data:image/svg+xml;utf8,<svg xmlns=%27http://www.w3.org/2000/svg%27 viewBox=%270 0 24 24%27><path fill=%27%23616161%27 d=%27M19 3H5a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h14a2 2 0 0 0 2-2V5a2 2 0 0 0-2-2zm0 12h-4a3 3 0 0 1-6 0H5V5h14z%27/></svg>"}}]);