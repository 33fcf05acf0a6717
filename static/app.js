// Small progressive enhancements; every page works without this file.
document.addEventListener("change", (event) => {
  const el = event.target;
  if (el instanceof HTMLSelectElement && el.hasAttribute("data-autosubmit")) {
    el.form.submit();
  }
});
